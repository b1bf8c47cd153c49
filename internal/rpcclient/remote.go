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
	"time"

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
	if r.Token == "" {
		return fmt.Errorf("--host: no token: give --token-file or %s", apiwire.TokenEnv)
	}
	if len(r.Token) > apiwire.MaxTokenBytes || strings.ContainsAny(r.Token, " \t\r\n") {
		return fmt.Errorf("token: not a boxd token (longer than %d bytes or with spaces)", apiwire.MaxTokenBytes)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if r.CAFile != "" {
		pem, err := os.ReadFile(r.CAFile)
		if err != nil {
			return fmt.Errorf("--tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("--tls-ca: %s holds no PEM certificate", r.CAFile)
		}
		cfg.RootCAs = pool
	}
	proto := new(http.Protocols)
	proto.SetHTTP2(true)
	proto.SetUnencryptedHTTP2(u.Scheme == "http")
	tr := &http.Transport{
		TLSClientConfig:     cfg,
		Protocols:           proto,
		TLSHandshakeTimeout: 10 * time.Second,
		HTTP2: &http.HTTP2Config{
			MaxReadFrameSize:              apiwire.MaxFrameBytes,
			MaxReceiveBufferPerStream:     apiwire.StreamWindowBytes,
			MaxReceiveBufferPerConnection: apiwire.ConnWindowBytes,
		},
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
	}
	remoteMu.Lock()
	defer remoteMu.Unlock()
	remote = &remoteClient{base: strings.TrimSuffix(u.String(), "/"), hc: apiwire.ClientOver(bearer{"Bearer " + r.Token, tr})}
	return nil
}

func remoteOf() *remoteClient {
	remoteMu.Lock()
	defer remoteMu.Unlock()
	return remote
}

// bearer adds the token to every request.
type bearer struct {
	value string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", b.value)
	return b.next.RoundTrip(req)
}
