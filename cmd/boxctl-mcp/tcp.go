package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/boxd-dev/boxd/mcpserver"
)

// tcpOptions are the flags of --http.
type tcpOptions struct {
	addr      string
	tokenFile string
	tokenOut  string
	cert, key string
}

// runTCP serves streamable HTTP on a TCP address until SIGINT or SIGTERM.
// A TCP port is open to every local user (and, beyond loopback, to the
// network), so every request must carry the bearer token, browsers'
// requests from other origins are refused, and an address beyond
// loopback needs TLS: the token would otherwise cross the network in
// clear.
func runTCP(t tcpOptions, o mcpserver.HTTPOptions) error {
	addr, err := net.ResolveTCPAddr("tcp", t.addr)
	if err != nil {
		return fmt.Errorf("--http %s: %w", t.addr, err)
	}
	if t.cert == "" && (addr.IP == nil || !addr.IP.IsLoopback()) {
		return fmt.Errorf("--http %s: not a loopback address: serving beyond this machine needs --tls-cert and --tls-key", t.addr)
	}
	if t.cert != "" {
		pair, err := tls.LoadX509KeyPair(t.cert, t.key)
		if err != nil {
			return fmt.Errorf("--tls-cert %s, --tls-key %s: %w", t.cert, t.key, err)
		}
		o.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	}
	generated := t.tokenFile == ""
	if generated {
		o.Token, err = mcpserver.NewToken()
	} else {
		o.Token, err = mcpserver.ReadTokenFile(t.tokenFile)
	}
	if err != nil {
		return err
	}
	if t.tokenOut != "" {
		if err := mcpserver.WriteTokenFile(t.tokenOut, o.Token); err != nil {
			return err
		}
	}
	ln, err := net.ListenTCP("tcp", addr)
	if err != nil {
		return fmt.Errorf("--http: %w", err)
	}
	bound := ln.Addr().(*net.TCPAddr)
	host, _, _ := net.SplitHostPort(t.addr)
	o.CheckOrigin = true
	o.Origins = mcpserver.Origins(bound, host, o.TLS != nil)
	scheme := "http"
	if o.TLS != nil {
		scheme = "https"
	}
	// Always said: with port 0 it is the only way to learn the port.
	fmt.Fprintf(os.Stderr, "boxctl mcp: serving MCP on %s://%s/mcp\n", scheme, bound)
	if generated && t.tokenOut == "" {
		fmt.Fprintf(os.Stderr, "boxctl mcp: bearer token (shown once): %s\n", o.Token)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	o.Log.Info("serving MCP over streamable HTTP", "http", bound.String(), "tls", o.TLS != nil, "socket", o.Socket,
		"idle_timeout", o.IdleTimeout, "shared_sessions", o.SharedSessions)
	return mcpserver.ServeHTTP(ctx, ln, o)
}
