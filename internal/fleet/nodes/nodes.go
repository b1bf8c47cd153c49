// Package nodes is how a fleet's control plane (boxd-controller,
// boxd-gateway) reaches each node's boxd: over its TLS listener, with the
// one client certificate the nodes name in --owner-asserter, asserting on
// every call the owner it acts for.
package nodes

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"sync"

	"connectrpc.com/connect"

	"github.com/boxd-dev/boxd/rpc/apiwire"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
)

// TLSFiles are the PEM files of the control plane's node identity.
type TLSFiles struct {
	CA   string // the CA of the nodes' serving certificates
	Cert string // the asserter's client certificate and key
	Key  string
	// ServerName, if set, is the name every node's serving certificate
	// carries (one name for a fleet whose nodes' addresses are pod IPs);
	// empty: each node's address.
	ServerName string
}

// Config loads the files into a client TLS configuration.
func (f TLSFiles) Config() (*tls.Config, error) {
	if f.CA == "" || f.Cert == "" || f.Key == "" {
		return nil, fmt.Errorf("--node-ca, --node-cert and --node-key are all required")
	}
	pem, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, fmt.Errorf("--node-ca: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--node-ca: %s holds no PEM certificate", f.CA)
	}
	pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("--node-cert/--node-key: %w", err)
	}
	return &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12, ServerName: f.ServerName}, nil
}

// Pool keeps one HTTP/2 client per node address.
type Pool struct {
	tls *tls.Config
	mu  sync.Mutex
	hc  map[string]*http.Client
}

// NewPool makes a pool presenting cfg's certificate.
func NewPool(cfg *tls.Config) *Pool {
	return &Pool{tls: cfg, hc: map[string]*http.Client{}}
}

// Client returns the HTTP client and base URL of the node at address
// (HOST:PORT of its --listen).
func (p *Pool) Client(address string) (*http.Client, string) {
	base := "https://" + address
	p.mu.Lock()
	defer p.mu.Unlock()
	hc := p.hc[address]
	if hc == nil {
		u, _ := url.Parse(base)
		hc = apiwire.RemoteClientTLS(u, "", p.tls)
		p.hc[address] = hc
	}
	return hc, base
}

// Sandboxes is a SandboxService client of the node at address.
func (p *Pool) Sandboxes(address string) boxdv1connect.SandboxServiceClient {
	hc, base := p.Client(address)
	return boxdv1connect.NewSandboxServiceClient(hc, base, apiwire.ClientOptions(hc)...)
}

// Assert sets the owner and scope a call acts for.
func Assert(h http.Header, owner, scope string) {
	h.Set(apiwire.AssertOwnerHeader, owner)
	h.Set(apiwire.AssertScopeHeader, scope)
}

// Request wraps msg in a request asserting owner with scope write (the
// controller creates and deletes).
func Request[T any](msg *T, owner string) *connect.Request[T] {
	r := connect.NewRequest(msg)
	Assert(r.Header(), owner, "write")
	return r
}
