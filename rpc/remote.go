//go:build linux

package rpc

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/boxd-dev/boxd/rpc/apiwire"
	"github.com/boxd-dev/boxd/runtime"
)

// A TCP listener has no peer credentials: each call there names its caller
// with a bearer token (Authorization: Bearer TOKEN), whose owner then is
// the caller exactly as SO_PEERCRED's uid is on the Unix socket (a Peer
// in the context, runtime.Caller), and whose scope bounds the calls it
// may make (scopeAllows). A call without a valid token goes on to the
// gate with the reason, which refuses it as unauthenticated; health and
// reflection refuse it too (authInterceptor).

// RemoteListener is a TCP listener boxd serves the API on.
type RemoteListener struct {
	net.Listener
	// TLS, if set, is the listener's server configuration; nil only on a
	// loopback address (cmd/boxd refuses plain TCP elsewhere).
	TLS *tls.Config
}

type tokenKey struct{}
type authErrKey struct{}

// authBlockedKey marks a call refused because its address is blocked:
// neither audited nor logged, so a flood from one address cannot rotate
// the audit log's earlier lines away or fill the daemon's log.
type authBlockedKey struct{}

func authBlocked(ctx context.Context) bool {
	b, _ := ctx.Value(authBlockedKey{}).(bool)
	return b
}

func tokenFrom(ctx context.Context) (TokenRecord, bool) {
	t, ok := ctx.Value(tokenKey{}).(TokenRecord)
	return t, ok
}

func authErrFrom(ctx context.Context) error {
	err, _ := ctx.Value(authErrKey{}).(error)
	return err
}

// Failed authentications from one source address: after authFailLimit in
// authFailWindow, the address is refused for authBlockFor, before its
// tokens are even hashed.
const (
	authFailLimit  = 10
	authFailWindow = 10 * time.Second
	authBlockFor   = 30 * time.Second
)

type authLimiter struct {
	mu    sync.Mutex
	addrs map[string]*authFails
}

type authFails struct {
	since, until time.Time
	n            int
}

func newAuthLimiter() *authLimiter { return &authLimiter{addrs: map[string]*authFails{}} }

// blocked says whether addr is being refused, and for how long yet.
func (l *authLimiter) blocked(addr string, now time.Time) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.addrs[addr]
	if f == nil || !now.Before(f.until) {
		return 0, false
	}
	return f.until.Sub(now), true
}

func (l *authLimiter) fail(addr string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.addrs) > 100000 { // a flood of addresses: forget the old ones
		for a, f := range l.addrs {
			if now.Sub(f.since) > authFailWindow && !now.Before(f.until) {
				delete(l.addrs, a)
			}
		}
	}
	f := l.addrs[addr]
	if f == nil || now.Sub(f.since) > authFailWindow {
		f = &authFails{since: now}
		l.addrs[addr] = f
	}
	f.n++
	if f.n >= authFailLimit {
		f.until = now.Add(authBlockFor)
		f.n, f.since = 0, now
	}
}

// remoteHandler authenticates each call on a TCP listener before h.
func (s *Server) remoteHandler(h http.Handler, lim *authLimiter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		addr, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			addr = r.RemoteAddr
		}
		now := time.Now()
		if left, ok := lim.blocked(addr, now); ok {
			ctx = context.WithValue(ctx, authErrKey{}, connect.NewError(connect.CodeUnauthenticated,
				fmt.Errorf("too many failed authentications from %s: refused for %s more", addr, left.Round(time.Second))))
			ctx = context.WithValue(ctx, authBlockedKey{}, true)
		} else if t, err := s.remoteIdentity(r); err != nil {
			lim.fail(addr, now)
			ctx = context.WithValue(ctx, authErrKey{}, connect.NewError(connect.CodeUnauthenticated, err))
		} else {
			ctx = s.tokenCaller(ctx, t)
			if t.Hash != "" && apiwire.IsStream(r.Header.Get("Content-Type")) {
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				defer cancel()
				// Ending the context alone would not wake a handler
				// blocked reading the next message: the body is closed too.
				body := r.Body
				go s.Tokens.watch(ctx, func() { cancel(); body.Close() }, t.Hash)
			}
		}
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// remoteIdentity names the caller of r: its token if it presents one,
// else its client certificate through the --client-cert-map. The TLS
// handshake already verified the certificate against --client-ca.
func (s *Server) remoteIdentity(r *http.Request) (TokenRecord, error) {
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 && s.OwnerAsserter.matches(r.TLS.PeerCertificates[0]) && r.Header.Get("Authorization") != "" {
		return TokenRecord{}, errors.New("the owner asserter's certificate asserts owners: a call with it carries no token")
	}
	if r.Header.Get("Authorization") != "" || r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return s.bearer(r)
	}
	cert := r.TLS.PeerCertificates[0]
	if s.OwnerAsserter.matches(cert) {
		return s.OwnerAsserter.asserted(r)
	}
	if s.CertMap == nil {
		return TokenRecord{}, fmt.Errorf("no token, and client certificates name no caller here (boxd has no --client-cert-map); certificate %q", certName(cert))
	}
	t, ok := s.CertMap.Lookup(cert)
	if !ok {
		return TokenRecord{}, fmt.Errorf("client certificate %q matches no line of --client-cert-map, and the call has no token", certName(cert))
	}
	return t, nil
}

// bearer reads and checks the call's token.
func (s *Server) bearer(r *http.Request) (TokenRecord, error) {
	v := r.Header.Get("Authorization")
	if v == "" {
		return TokenRecord{}, errors.New("no token: a call on a TCP listener needs Authorization: Bearer TOKEN (boxctl token create)")
	}
	tok, ok := strings.CutPrefix(v, "Bearer ")
	if !ok || s.Tokens == nil {
		return TokenRecord{}, errBadToken
	}
	return s.Tokens.Authenticate(strings.TrimSpace(tok))
}

// tokenCaller makes the token's owner the caller: a Peer (pid 0: no
// process) with the user's groups as the host knows them now, and the
// runtime's caller, admin only if both the scope and the user are.
func (s *Server) tokenCaller(ctx context.Context, t TokenRecord) context.Context {
	p := Peer{UID: int32(t.UID), GID: -1, Groups: []uint32{}}
	if gid, groups, ok := userGroups(t.UID); ok {
		p.GID, p.Groups = int32(gid), groups
	}
	ctx = context.WithValue(ctx, peerKey{}, p)
	ctx = context.WithValue(ctx, tokenKey{}, t)
	return runtime.WithCaller(ctx, runtime.Caller{UID: t.UID, Admin: t.Scope == ScopeAdmin && s.isAdmin(p),
		GID: uint32(p.GID), Groups: p.Groups, GIDKnown: p.GID >= 0})
}

type groupsEntry struct {
	gid    uint32
	groups []uint32
	at     time.Time
}

// groupCache keeps each user's groups for a few seconds: reading
// /etc/group on every call would cost more than the call.
var groupCache sync.Map

func userGroups(uid uint32) (uint32, []uint32, bool) {
	if v, ok := groupCache.Load(uid); ok {
		e := v.(groupsEntry)
		if time.Since(e.at) < 5*time.Second {
			return e.gid, e.groups, true
		}
	}
	u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
	if err != nil {
		return 0, nil, false
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return 0, nil, false
	}
	ids, _ := u.GroupIds()
	groups := []uint32{}
	for _, id := range ids {
		if g, err := strconv.ParseUint(id, 10, 32); err == nil {
			groups = append(groups, uint32(g))
		}
	}
	groupCache.Store(uid, groupsEntry{uint32(gid), groups, time.Now()})
	return uint32(gid), groups, true
}

// execCall says whether a procedure runs commands in a sandbox: what a
// token of scope exec may do besides reading.
func execCall(procedure string) bool {
	if strings.HasPrefix(procedure, "/boxd.v1.ProcessService/") {
		return true
	}
	m := method(procedure)
	return m == "Exec" || m == "ExecStream"
}

// scopeAllows refuses a call the token's scope does not cover.
func scopeAllows(scope, procedure string) error {
	switch scope {
	case ScopeWrite, ScopeAdmin:
		return nil
	case ScopeExec:
		if !mutating(procedure) || execCall(procedure) {
			return nil
		}
	case ScopeRead:
		if !mutating(procedure) {
			return nil
		}
	}
	return connect.NewError(connect.CodePermissionDenied,
		fmt.Errorf("%s: the token's scope %s does not allow it", method(procedure), scope))
}

// authInterceptor refuses calls without a valid token on a TCP listener
// for the services the gate does not guard (health, reflection).
type authInterceptor struct{}

func (authInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if err := authErrFrom(ctx); err != nil {
			return nil, err
		}
		return next(ctx, req)
	}
}

func (authInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (authInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if err := authErrFrom(ctx); err != nil {
			return err
		}
		return next(ctx, conn)
	}
}

// remoteServer is srv's twin for the TCP listeners: the same settings,
// the handler behind token authentication, and HTTP/2 over TLS offered by
// ALPN (h2 before http/1.1, as gRPC needs).
func (s *Server) remoteServer(srv *http.Server) *http.Server {
	proto := *srv.Protocols
	proto.SetHTTP2(true)
	r := &http.Server{
		Handler:           s.remoteHandler(srv.Handler, newAuthLimiter()),
		Protocols:         &proto,
		HTTP2:             srv.HTTP2,
		ReadHeaderTimeout: srv.ReadHeaderTimeout, // also bounds the TLS handshake
		IdleTimeout:       srv.IdleTimeout,
		MaxHeaderBytes:    srv.MaxHeaderBytes,
		ConnContext:       s.callerContext,
		ErrorLog:          srv.ErrorLog,
	}
	return r
}

// remoteListener wraps rl in TLS if it has a configuration.
func remoteListener(rl RemoteListener) net.Listener {
	if rl.TLS == nil {
		return rl.Listener
	}
	cfg := rl.TLS.Clone()
	cfg.NextProtos = []string{"h2", "http/1.1"}
	if cfg.MinVersion == 0 {
		cfg.MinVersion = tls.VersionTLS12
	}
	return tls.NewListener(rl.Listener, cfg)
}
