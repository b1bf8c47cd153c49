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
// for hosts named with --insecure-registry.
package registry

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/containerd/containerd/v2/core/remotes"
	"github.com/containerd/containerd/v2/core/remotes/docker"

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
	client   *http.Client
	insecure map[string]bool
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
	dialer := &net.Dialer{Timeout: cfg.Timeout, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &idleConn{Conn: c, idle: cfg.Timeout}, nil
		},
		TLSClientConfig:       &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:   cfg.Timeout,
		ResponseHeaderTimeout: cfg.Timeout,
		ExpectContinueTimeout: 5 * time.Second,
		MaxIdleConns:          16,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
	}
	return &Registry{store: store, cfg: cfg, client: &http.Client{Transport: tr}, insecure: insecure}, nil
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

// resolver reaches host only, with auth's credentials for that host.
func (r *Registry) resolver(host string, auth Auth, tracker docker.StatusTracker) remotes.Resolver {
	creds := func(h string) (string, string, error) {
		if h != host {
			return "", "", nil
		}
		if auth.IdentityToken != "" {
			return "", auth.IdentityToken, nil
		}
		return auth.Username, auth.Password, nil
	}
	authorizer := docker.NewDockerAuthorizer(docker.WithAuthClient(r.client), docker.WithAuthCreds(creds))
	scheme := "https"
	if r.insecure[strings.ToLower(host)] {
		scheme = "http"
	}
	hosts := func(h string) ([]docker.RegistryHost, error) {
		if h != host {
			return nil, fmt.Errorf("registry %s is not the one the reference names (%s)", h, host)
		}
		return []docker.RegistryHost{{
			Client: r.client, Authorizer: authorizer, Host: h, Scheme: scheme, Path: "/v2",
			Capabilities: docker.HostCapabilityPull | docker.HostCapabilityResolve | docker.HostCapabilityPush,
		}}, nil
	}
	return docker.NewResolver(docker.ResolverOptions{Hosts: hosts, Tracker: tracker})
}
