//go:build linux

// Package registry pulls images from OCI registries into boxd's image store
// and pushes them back, with containerd's remotes/docker resolver. It exists
// so that every byte a registry sends is checked before it becomes an
// image: layers are read as hostile tars while they download, and a pull
// that fails anywhere leaves no image, content or snapshot behind.
//
// The daemon never reads a caller's files: credentials come in the request
// (boxctl reads the caller's docker config). Registries are reached over
// HTTPS with the system's roots plus boxd's --registry-ca; plain HTTP only
// for hosts named with --insecure-registry. Where a registry redirects boxd
// or sends it for a token is checked (guard).
package registry

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/containerd/containerd/v2/core/remotes"
	"github.com/containerd/containerd/v2/core/remotes/docker"

	"github.com/boxd-dev/boxd/network"
	"github.com/boxd-dev/boxd/snapshot"
)

// DefaultTimeout is how long a registry may stay silent (no connection, no
// response header, no body byte) before a pull or push fails.
const DefaultTimeout = 30 * time.Second

// DefaultMaxImageSize bounds the uncompressed size of a pulled image's
// layers, so a decompression bomb cannot fill the disk.
const DefaultMaxImageSize = 32 << 30

// Config is how boxd reaches registries.
type Config struct {
	// Insecure are the HOST:PORT names reached over plain HTTP. Every
	// other registry is HTTPS only.
	Insecure []string
	// CAs are PEM files, or directories of *.pem and *.crt files, whose
	// certificates are trusted besides the system's roots.
	CAs []string
	// Timeout bounds each silence of a registry (DefaultTimeout if 0).
	Timeout time.Duration
	// MaxImageSize bounds the uncompressed size of a pulled image's layers
	// (0: no bound).
	MaxImageSize int64
	// BridgeSubnet is boxd's --bridge-subnet, part of the always-blocked
	// set redirects and realms may not reach (network.DefaultSubnet if
	// unset).
	BridgeSubnet netip.Prefix
	// Block is boxd's --block: the administrator's additions to that set.
	Block []netip.Prefix
}

// Auth is what a caller sends to log in to the registry its reference
// names. It is used for that host only and never stored.
type Auth struct {
	Username, Password string
	// IdentityToken is an OAuth2 refresh token (docker config's
	// "identitytoken"), used instead of a password.
	IdentityToken string
}

// Registry pulls and pushes for one boxd.
type Registry struct {
	store    *snapshot.Store
	cfg      Config
	tls      *tls.Config
	insecure map[string]bool
	// lookup resolves a redirect's or realm's host for guard's check by
	// name (a test stands in for DNS with it).
	lookup func(ctx context.Context, host string) ([]netip.Addr, error)
}

// New checks cfg and loads its CAs.
func New(store *snapshot.Store, cfg Config) (*Registry, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool()
	}
	for _, p := range cfg.CAs {
		if err := addCAs(roots, p); err != nil {
			return nil, fmt.Errorf("--registry-ca %s: %w", p, err)
		}
	}
	insecure := map[string]bool{}
	for _, h := range cfg.Insecure {
		if _, _, err := net.SplitHostPort(h); err != nil || strings.ContainsAny(h, "/ ") {
			return nil, fmt.Errorf("--insecure-registry %q: want HOST:PORT", h)
		}
		insecure[strings.ToLower(h)] = true
	}
	if !cfg.BridgeSubnet.IsValid() {
		cfg.BridgeSubnet = netip.MustParsePrefix(network.DefaultSubnet)
	}
	return &Registry{store: store, cfg: cfg, insecure: insecure,
		tls: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		lookup: func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}}, nil
}

// client is the HTTP client of one pull or push from host: its own
// transport, so no connection is shared with another reference's
// requests, kept in bounds by a guard. The caller closes its idle
// connections when done.
func (r *Registry) client(host string) (*http.Client, *guard) {
	scheme := "https"
	if r.insecure[strings.ToLower(host)] {
		scheme = "http"
	}
	g := &guard{
		registry: hostPort(&url.URL{Scheme: scheme, Host: host}),
		tls:      scheme == "https",
		insecure: r.insecure,
		blocked:  func() ([]netip.Prefix, error) { return network.Blocked(r.cfg.BridgeSubnet, r.cfg.Block) },
		lookup:   r.lookup,
	}
	dial := g.DialContext(&net.Dialer{Timeout: r.cfg.Timeout, KeepAlive: 30 * time.Second})
	tr := &http.Transport{
		Proxy: g.Proxy,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &idleConn{Conn: c, idle: r.cfg.Timeout}, nil
		},
		TLSClientConfig:       r.tls,
		TLSHandshakeTimeout:   r.cfg.Timeout,
		ResponseHeaderTimeout: r.cfg.Timeout,
		ExpectContinueTimeout: 5 * time.Second,
		MaxIdleConns:          16,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
	}
	return &http.Client{Transport: g.RoundTripper(tr)}, g
}

// addCAs adds the certificates of a PEM file, or of every *.pem and *.crt
// file in a directory.
func addCAs(pool *x509.CertPool, p string) error {
	st, err := os.Stat(p)
	if err != nil {
		return err
	}
	files := []string{p}
	if st.IsDir() {
		files = nil
		for _, pat := range []string{"*.pem", "*.crt"} {
			m, _ := filepath.Glob(filepath.Join(p, pat))
			files = append(files, m...)
		}
		if len(files) == 0 {
			return errors.New("the directory holds no *.pem or *.crt file")
		}
	}
	slices.Sort(files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if !pool.AppendCertsFromPEM(b) {
			return fmt.Errorf("%s holds no PEM certificate", f)
		}
	}
	return nil
}

// idleConn fails a read or write after the registry stayed silent for
// idle, so a hanging registry ends a pull with a clear error while a slow
// but steady download of a big layer is never cut.
type idleConn struct {
	net.Conn
	idle time.Duration
}

func (c *idleConn) Read(p []byte) (int, error) {
	_ = c.Conn.SetReadDeadline(time.Now().Add(c.idle))
	return c.Conn.Read(p)
}

func (c *idleConn) Write(p []byte) (int, error) {
	_ = c.Conn.SetWriteDeadline(time.Now().Add(c.idle))
	return c.Conn.Write(p)
}

// resolver reaches host only, with auth's credentials for that host. done
// closes its connections.
func (r *Registry) resolver(host string, auth Auth, tracker docker.StatusTracker) (_ remotes.Resolver, done func()) {
	creds := func(h string) (string, string, error) {
		if h != host {
			return "", "", nil
		}
		if auth.IdentityToken != "" {
			return "", auth.IdentityToken, nil
		}
		return auth.Username, auth.Password, nil
	}
	client, g := r.client(host)
	authorizer := guardedAuthorizer{g: g,
		Authorizer: docker.NewDockerAuthorizer(docker.WithAuthClient(client), docker.WithAuthCreds(creds))}
	scheme := "https"
	if !g.tls {
		scheme = "http"
	}
	hosts := func(h string) ([]docker.RegistryHost, error) {
		if h != host {
			return nil, fmt.Errorf("registry %s is not the one the reference names (%s)", h, host)
		}
		return []docker.RegistryHost{{
			Client: client, Authorizer: authorizer, Host: h, Scheme: scheme, Path: "/v2",
			Capabilities: docker.HostCapabilityPull | docker.HostCapabilityResolve | docker.HostCapabilityPush,
		}}, nil
	}
	return docker.NewResolver(docker.ResolverOptions{Hosts: hosts, Tracker: tracker}), client.CloseIdleConnections
}
