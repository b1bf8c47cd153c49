//go:build linux

package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/boxd-dev/boxd/rpc"
)

// boxd serves its API on TCP besides the Unix socket with --listen
// tcp://ADDR:PORT. TCP has no peer credentials, so every call there
// presents a bearer token (rpc/remote.go), and the token must not cross a
// network in the clear: plain TCP is refused unless the address is
// loopback.

func listenFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringSliceFlag{Name: "listen", Usage: "also serve the API on tcp://ADDR:PORT, each call authenticated by a bearer token (boxctl token create); TLS (--tls-cert, --tls-key) is required unless ADDR is loopback (repeatable)"},
		&cli.StringFlag{Name: "tls-cert", Usage: "PEM certificate (chain) of the --listen addresses"},
		&cli.StringFlag{Name: "tls-key", Usage: "PEM private key of --tls-cert"},
		&cli.StringFlag{Name: "client-ca", Usage: "PEM file of the CA whose client certificates the --listen addresses require (mutual TLS); a certificate names a caller only through --client-cert-map"},
		&cli.StringFlag{Name: "client-cert-map", Usage: "file of lines KIND:NAME USER SCOPE (KIND cn, dns, email or uri) naming the caller of a client certificate; a certificate no line matches is unauthenticated"},
		&cli.StringFlag{Name: "owner-asserter", Usage: "KIND:NAME (cn, dns, email or uri) of the one --client-ca certificate that may assert an owner on a caller's behalf (headers Boxd-Assert-Owner, Boxd-Assert-Scope; never admin): a fleet's boxd-gateway and boxd-controller"},
		&cli.StringFlag{Name: "metrics-listen", Usage: "serve Prometheus metrics on ADDR:PORT (/metrics), to a bearer token of scope metrics or admin; TLS (--tls-cert) unless ADDR is loopback"},
	}
}

// listenSpec is one --listen address, checked.
type listenSpec struct {
	addr    string
	tls     *tls.Config
	metrics bool // --metrics-listen's
}

// parseListen checks the --listen addresses and loads the certificate,
// before boxd touches the host.
func parseListen(cc *cli.Context) ([]listenSpec, error) {
	addrs := cc.StringSlice("listen")
	cert, key := cc.String("tls-cert"), cc.String("tls-key")
	if (cert == "") != (key == "") {
		return nil, fmt.Errorf("--tls-cert and --tls-key go together")
	}
	var cfg *tls.Config
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		cfg = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
		if err := requireClientCerts(cc, cfg); err != nil {
			return nil, err
		}
		if len(addrs) == 0 && cc.String("metrics-listen") == "" {
			return nil, fmt.Errorf("--tls-cert: no --listen tcp:// address to serve it on")
		}
	}
	if cfg == nil && (cc.String("client-ca") != "" || cc.String("client-cert-map") != "" || cc.String("owner-asserter") != "") {
		return nil, fmt.Errorf("--client-ca, --client-cert-map and --owner-asserter need TLS: give --tls-cert and --tls-key")
	}
	var out []listenSpec
	if m := cc.String("metrics-listen"); m != "" {
		host, _, err := net.SplitHostPort(m)
		if err != nil {
			return nil, fmt.Errorf("--metrics-listen: %q: %w", m, err)
		}
		if cfg == nil && !loopback(host) {
			return nil, fmt.Errorf("--metrics-listen: %q is not a loopback address: plain HTTP would carry tokens in the clear; give --tls-cert and --tls-key", m)
		}
		out = append(out, listenSpec{addr: m, tls: cfg, metrics: true})
	}
	for _, a := range addrs {
		hostPort, ok := strings.CutPrefix(a, "tcp://")
		if !ok {
			return nil, fmt.Errorf("--listen: %q is not tcp://ADDR:PORT", a)
		}
		host, _, err := net.SplitHostPort(hostPort)
		if err != nil {
			return nil, fmt.Errorf("--listen: %q: %w", a, err)
		}
		if cfg == nil && !loopback(host) {
			return nil, fmt.Errorf("--listen: %q is not a loopback address: plain TCP would carry tokens in the clear; give --tls-cert and --tls-key", a)
		}
		out = append(out, listenSpec{addr: hostPort, tls: cfg})
	}
	return out, nil
}

// requireClientCerts makes cfg require a client certificate signed by
// --client-ca, if one is given.
func requireClientCerts(cc *cli.Context, cfg *tls.Config) error {
	caFile := cc.String("client-ca")
	if caFile == "" {
		if cc.String("owner-asserter") != "" {
			return fmt.Errorf("--owner-asserter: give --client-ca, the CA whose certificate it names")
		}
		if cc.String("client-cert-map") != "" {
			return fmt.Errorf("--client-cert-map: give --client-ca, the CA whose certificates it maps")
		}
		return nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return fmt.Errorf("--client-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return fmt.Errorf("--client-ca: %s holds no PEM certificate", caFile)
	}
	cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	if a := cc.String("owner-asserter"); a != "" {
		if _, err := rpc.ParseOwnerAsserter(a); err != nil {
			return err
		}
	}
	return nil
}

// loopback says whether host is a loopback IP literal; a name is not
// trusted to resolve to one.
func loopback(host string) bool {
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// openRemote opens the --listen addresses and the token store for srv.
func openRemote(cc *cli.Context, specs []listenSpec, srv *rpc.Server) (func(), error) {
	ts, err := rpc.OpenTokens(filepath.Join(cc.String("state-dir"), "tokens.json"))
	if err != nil {
		return nil, err
	}
	srv.Tokens = ts
	if a := cc.String("owner-asserter"); a != "" {
		if srv.OwnerAsserter, err = rpc.ParseOwnerAsserter(a); err != nil {
			return nil, err
		}
	}
	closeAll := func() {
		for _, rl := range srv.Remote {
			rl.Close()
		}
	}
	var metrics *http.Server
	for _, s := range specs {
		ln, err := net.Listen("tcp", s.addr)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("--listen %s: %w", s.addr, err)
		}
		if s.metrics {
			srv.Metrics = rpc.NewMetrics(srv.Manager)
			metrics = metricsServer(srv, ln, s.tls)
			continue
		}
		srv.Remote = append(srv.Remote, rpc.RemoteListener{Listener: ln, TLS: s.tls})
	}
	return func() {
		closeAll()
		if metrics != nil {
			metrics.Close()
		}
	}, nil
}

// metricsServer serves srv's metrics on ln (over TLS if cfg is set) until
// it is closed.
func metricsServer(srv *rpc.Server, ln net.Listener, cfg *tls.Config) *http.Server {
	mux := http.NewServeMux()
	mux.Handle("/metrics", srv.MetricsHandler())
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 64 << 10}
	if cfg != nil {
		hs.TLSConfig = cfg.Clone()
		go func() { _ = hs.ServeTLS(ln, "", "") }()
	} else {
		go func() { _ = hs.Serve(ln) }()
	}
	srv.Log.Info("serving metrics", "address", ln.Addr().String(), "tls", cfg != nil)
	return hs
}
