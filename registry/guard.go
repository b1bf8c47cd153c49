//go:build linux

package registry

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"syscall"

	"github.com/containerd/containerd/v2/core/remotes/docker"
	"github.com/containerd/containerd/v2/core/remotes/docker/auth"
	"github.com/containerd/errdefs"

	"github.com/boxd-dev/boxd/network"
)

// A registry decides where boxd goes next: it may redirect any request and
// names the bearer realm boxd fetches tokens (with the caller's
// credentials) from. boxd makes those requests from the host's network,
// so a hostile registry could point them at the host's own services,
// cloud metadata or the private network (SSRF). guard keeps one pull's or
// push's requests to:
//
//   - the registry the reference names, and hosts named with
//     --insecure-registry, wherever they are (the admin or caller chose
//     them, not the registry);
//   - any other host only at an address outside boxd's always-blocked
//     set (network.Blocked: "this network", loopback, link-local,
//     multicast, boxd's bridge, the host's addresses and private
//     networks), checked by name when a redirect or realm is seen (a
//     clear error) and again on the address really dialled (a
//     net.Dialer Control), so a name that resolves elsewhere the second
//     time (DNS rebinding) gains nothing;
//   - plain HTTP only to hosts named with --insecure-registry, and never
//     after HTTPS: no redirect from HTTPS to HTTP, no HTTP realm for an
//     HTTPS registry (the realm gets the caller's password).
type guard struct {
	registry string // the reference's registry, host:port in lower case
	tls      bool   // it is reached over HTTPS
	insecure map[string]bool
	blocked  func() ([]netip.Prefix, error)
	lookup   func(ctx context.Context, host string) ([]netip.Addr, error)
	proxies  sync.Map // host:port of the proxies the environment named
}

// guardError is a request guard refused; it names the request's target.
type guardError struct{ msg string }

func (e *guardError) Error() string { return e.msg }
func (e *guardError) Unwrap() error { return errdefs.ErrFailedPrecondition }

func refused(format string, args ...any) error {
	return &guardError{msg: fmt.Sprintf(format, args...)}
}

var defaultPorts = map[string]string{"http": "80", "https": "443", "socks5": "1080", "socks5h": "1080"}

// hostPort is u's host:port in lower case, the port defaulted by scheme as
// net/http dials it.
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = defaultPorts[u.Scheme]
	}
	return strings.ToLower(net.JoinHostPort(u.Hostname(), port))
}

// exempt reports whether hp is a host boxd reaches wherever it is.
func (g *guard) exempt(hp string) bool {
	if hp == g.registry || g.insecure[hp] {
		return true
	}
	_, proxy := g.proxies.Load(hp)
	return proxy
}

// checkAddrs refuses what (a redirect, a realm, a connection) when one of
// addrs is in the always-blocked set. Without the set nothing is reached.
func (g *guard) checkAddrs(what, hp string, addrs []netip.Addr) error {
	set, err := g.blocked()
	if err != nil {
		return refused("%s refused: boxd cannot read its always-blocked set: %v", what, err)
	}
	for _, a := range addrs {
		if p, ok := network.BlockedAddr(set, a); ok {
			return refused("%s refused: %s is %s (%s, in boxd's always-blocked set); boxd goes there from a pull or push only for a host named with --insecure-registry %s",
				what, a.Unmap(), addrKind(a), p, hp)
		}
	}
	return nil
}

// addrKind says in words what a blocked address is.
func addrKind(a netip.Addr) string {
	a = a.Unmap()
	switch {
	case a.IsLoopback():
		return "loopback"
	case a.IsLinkLocalUnicast():
		return "link-local (cloud metadata)"
	case a.IsUnspecified() || (a.Is4() && a.As4()[0] == 0):
		return "\"this host\""
	case a.IsMulticast():
		return "multicast"
	case a.IsPrivate():
		return "a private address"
	}
	return "an address of this host or of boxd's bridge"
}

// checkURL refuses a request to u that guard does not allow; afterTLS says
// the request follows HTTPS (the registry's scheme, or a redirect's
// previous hop).
func (g *guard) checkURL(ctx context.Context, what string, u *url.URL, afterTLS bool) error {
	hp := hostPort(u)
	switch u.Scheme {
	case "https":
	case "http":
		if afterTLS {
			return refused("%s refused: plain HTTP after HTTPS (boxd never goes from HTTPS to HTTP)", what)
		}
		if !g.insecure[hp] {
			return refused("%s refused: plain HTTP to %s, which is not named with --insecure-registry", what, hp)
		}
	default:
		return refused("%s refused: scheme %q is not https or http", what, u.Scheme)
	}
	if g.exempt(hp) {
		return nil
	}
	host := u.Hostname()
	addrs := []netip.Addr{}
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = append(addrs, a)
	} else if found, err := g.lookup(ctx, host); err == nil {
		addrs = found
	} // a name that does not resolve fails at the dial
	return g.checkAddrs(what, hp, addrs)
}

// RoundTripper checks every request of one pull or push, redirects and
// realm fetches included, before base sends it.
func (g *guard) RoundTripper(base http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		what, afterTLS := "request to "+req.URL.Redacted(), g.tls
		if prev := req.Response; prev != nil && prev.Request != nil {
			// Set by net/http on the request a redirect made.
			what = fmt.Sprintf("redirect from %s to %s", prev.Request.URL.Redacted(), req.URL.Redacted())
			afterTLS = afterTLS || prev.Request.URL.Scheme == "https"
		}
		if err := g.checkURL(req.Context(), what, req.URL, afterTLS); err != nil {
			if req.Body != nil {
				_ = req.Body.Close()
			}
			return nil, err
		}
		return base.RoundTrip(req)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// DialContext dials addr (host:port as the URL names it) with base, and,
// unless the host is exempt, refuses a connection to any resolved address
// in the always-blocked set before it is made.
func (g *guard) DialContext(base *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, netw, addr string) (net.Conn, error) {
		d := *base
		hp := strings.ToLower(addr)
		if !g.exempt(hp) {
			d.Control = func(_, address string, _ syscall.RawConn) error {
				ap, err := netip.ParseAddrPort(address)
				if err != nil {
					return refused("connection to %s refused: %q is not an address", addr, address)
				}
				return g.checkAddrs("connection to "+addr, hp, []netip.Addr{ap.Addr()})
			}
		}
		return d.DialContext(ctx, netw, addr)
	}
}

// Proxy is http.ProxyFromEnvironment; the proxies it names are the
// admin's, so they are exempt (the requests' targets are still checked).
func (g *guard) Proxy(req *http.Request) (*url.URL, error) {
	u, err := http.ProxyFromEnvironment(req)
	if u != nil {
		g.proxies.Store(hostPort(u), true)
	}
	return u, err
}

// guardedAuthorizer checks each bearer realm a registry names before the
// authorizer fetches a token there.
type guardedAuthorizer struct {
	docker.Authorizer
	g *guard
}

func (a guardedAuthorizer) AddResponses(ctx context.Context, responses []*http.Response) error {
	last := responses[len(responses)-1]
	afterTLS := a.g.tls || (last.Request != nil && last.Request.URL.Scheme == "https")
	for _, c := range auth.ParseAuthHeader(last.Header) {
		if c.Scheme != auth.BearerAuth {
			continue
		}
		realm := c.Parameters["realm"]
		u, err := url.Parse(realm)
		if err != nil || u.Host == "" {
			return refused("bearer realm %q refused: not an absolute URL", realm)
		}
		if err := a.g.checkURL(ctx, "bearer realm "+u.Redacted(), u, afterTLS); err != nil {
			return err
		}
	}
	return a.Authorizer.AddResponses(ctx, responses)
}
