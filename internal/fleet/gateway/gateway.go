//go:build linux

// Package gateway is boxd-gateway's logic: one endpoint that speaks
// boxd's API (Connect, gRPC and gRPC-Web over HTTP/2 and TLS) and routes
// each call by the sandbox it names to that sandbox's node, streams
// included. The gateway checks the caller's token itself, against its one
// token store, and reaches the node with the certificate the nodes name in
// boxd --owner-asserter, asserting the token's owner and scope: the node
// then treats the call as that user's, so a user reaches through the
// gateway exactly the sandboxes it owns on any node.
package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"

	"connectrpc.com/connect"

	"github.com/boxd-dev/boxd/internal/fleet/nodes"
	"github.com/boxd-dev/boxd/rpc"
	"github.com/boxd-dev/boxd/rpc/apiwire"
)

// Resolver finds the node address of a sandbox by its boxd id.
type Resolver interface {
	Resolve(ctx context.Context, id string) (address string, err error)
}

// errUnknown is what a call naming no sandbox the fleet knows gets:
// not_found, with boxd's own wording for an unknown id.
func errUnknown(id string) error {
	return connect.NewError(connect.CodeNotFound, fmt.Errorf("sandbox %q not found", id))
}

// Gateway is the HTTP handler of boxd-gateway.
type Gateway struct {
	Tokens   *Tokens
	Nodes    *nodes.Pool
	Resolver Resolver
	Log      func(format string, args ...any)
	errw     *connect.ErrorWriter
}

// New makes a gateway.
func New(tokens *Tokens, pool *nodes.Pool, res Resolver, logf func(string, ...any)) *Gateway {
	return &Gateway{Tokens: tokens, Nodes: pool, Resolver: res, Log: logf, errw: connect.NewErrorWriter()}
}

// ServeHTTP authenticates the call, reads its first message for the
// sandbox id, and proxies it whole to the sandbox's node.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := g.serve(w, r); err != nil {
		_ = g.errw.Write(w, r, err)
	}
}

func (g *Gateway) serve(w http.ResponseWriter, r *http.Request) error {
	rec, err := g.authenticate(r)
	if err != nil {
		return err
	}
	first, id, err := sandboxOf(r)
	if err != nil {
		return err
	}
	addr, err := g.Resolver.Resolve(r.Context(), id)
	if err != nil {
		return err
	}
	r.Body = readCloser{io.MultiReader(bytes.NewReader(first), r.Body), r.Body}
	g.proxy(w, r, addr, rec)
	return nil
}

type readCloser struct {
	io.Reader
	io.Closer
}

// authenticate checks the bearer token against the gateway's store.
func (g *Gateway) authenticate(r *http.Request) (rpc.TokenRecord, error) {
	v := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(v, "Bearer ")
	if !ok || len(tok) > apiwire.MaxTokenBytes {
		return rpc.TokenRecord{}, connect.NewError(connect.CodeUnauthenticated,
			errors.New("no token: a call to the gateway needs Authorization: Bearer TOKEN (boxd-gateway token create)"))
	}
	rec, err := g.Tokens.Authenticate(strings.TrimSpace(tok))
	if err != nil {
		return rpc.TokenRecord{}, connect.NewError(connect.CodeUnauthenticated, err)
	}
	return rec, nil
}

// proxy sends r to the node at addr as the token's owner: the caller's
// own credentials never reach the node, and a scope of admin is asserted
// as write (the gateway acts for users, never as a node's administrator).
func (g *Gateway) proxy(w http.ResponseWriter, r *http.Request, addr string, rec rpc.TokenRecord) {
	hc, base := g.Nodes.Client(addr)
	target, _ := url.Parse(base)
	scope := rec.Scope
	if scope == rpc.ScopeAdmin {
		scope = rpc.ScopeWrite
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = target.Host
			pr.Out.Header.Del("Authorization")
			pr.Out.Header.Del("X-Forwarded-For")
			nodes.Assert(pr.Out.Header, fmt.Sprint(rec.UID), scope)
		},
		Transport:     hc.Transport,
		FlushInterval: -1, // streams: every message at once
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			g.Log("gateway: node %s: %v", addr, err)
			_ = g.errw.Write(w, r, connect.NewError(connect.CodeUnavailable, fmt.Errorf("the sandbox's node is unreachable: %w", err)))
		},
	}
	rp.ServeHTTP(w, r)
}
