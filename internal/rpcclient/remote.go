package rpcclient

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"

	"github.com/boxd-dev/boxd/rpc/apiwire"
)

// Remote is a TCP listener of boxd's (--listen) and what its calls
// present: a bearer token and, for a private CA, its certificates.
type Remote struct {
	// Host is https://HOST:PORT (http:// only for a plain loopback
	// listener).
	Host  string
	Token string
	// CAFile is a PEM file of CA certificates trusted instead of the
	// system's; empty: the system's.
	CAFile string
	// CertFile and KeyFile are a client certificate and its key (PEM),
	// for a listener that requires one (boxd --client-ca); with a
	// certificate the token may be empty, and the certificate names the
	// caller.
	CertFile, KeyFile string
}

// remote, once SetRemote has run, is where every client of this package
// goes instead of the socket: boxctl sets it from --host before any
// command runs, so no command can reach the local socket by mistake.
var (
	remoteMu sync.Mutex
	remote   *remoteClient
)

type remoteClient struct {
	base string
	hc   *http.Client
}

// SetRemote points every client made from now on at r.
func SetRemote(r Remote) error {
	u, err := url.Parse(r.Host)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return fmt.Errorf("--host: %q is not https://HOST:PORT", r.Host)
	}
	if (r.CertFile == "") != (r.KeyFile == "") {
		return fmt.Errorf("--tls-cert and --tls-key go together")
	}
	if r.Token == "" && r.CertFile == "" {
		return fmt.Errorf("--host: no token: give --token-file or %s (or a client certificate: --tls-cert, --tls-key)", apiwire.TokenEnv)
	}
	if len(r.Token) > apiwire.MaxTokenBytes || strings.ContainsAny(r.Token, " \t\r\n") {
		return fmt.Errorf("token: not a boxd token (longer than %d bytes or with spaces)", apiwire.MaxTokenBytes)
	}
	var roots *x509.CertPool
	if r.CAFile != "" {
		pem, err := os.ReadFile(r.CAFile)
		if err != nil {
			return fmt.Errorf("--tls-ca: %w", err)
		}
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return fmt.Errorf("--tls-ca: %s holds no PEM certificate", r.CAFile)
		}
	}
	cfg := &tls.Config{RootCAs: roots}
	if r.CertFile != "" {
		pair, err := tls.LoadX509KeyPair(r.CertFile, r.KeyFile)
		if err != nil {
			return fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	remoteMu.Lock()
	defer remoteMu.Unlock()
	remote = &remoteClient{base: strings.TrimSuffix(u.String(), "/"), hc: apiwire.RemoteClientTLS(u, r.Token, cfg)}
	return nil
}

func remoteOf() *remoteClient {
	remoteMu.Lock()
	defer remoteMu.Unlock()
	return remote
}
