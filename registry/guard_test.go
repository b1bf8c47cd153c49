//go:build linux

package registry

import (
	"context"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containerd/errdefs"
)

// trap is a listener a hostile registry points boxd at; it counts the
// connections it accepts, so a refusal is checked where it matters: no
// connection at all, not just no request.
type trap struct {
	*httptest.Server
	conns atomic.Int32
}

func newTrap(t *testing.T, tlsOn bool) *trap {
	t.Helper()
	tr := &trap{}
	tr.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "trap", http.StatusNotFound)
	}))
	tr.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			tr.conns.Add(1)
		}
	}
	if tlsOn {
		tr.StartTLS()
	} else {
		tr.Start()
	}
	t.Cleanup(tr.Close)
	return tr
}

func (tr *trap) host() string { return tr.Listener.Addr().String() }

// caFile writes the certificate of httptest's TLS servers for --registry-ca.
func caFile(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ca.pem")
	b := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// hostile is a registry that answers every request with answer.
func hostile(t *testing.T, tlsOn bool, answer func(w http.ResponseWriter, r *http.Request)) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(answer))
	if tlsOn {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv
}

func redirectTo(u string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, u, http.StatusTemporaryRedirect) }
}

func realmAt(u string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="`+u+`",service="reg",scope="repository:x:pull"`)
		w.WriteHeader(http.StatusUnauthorized)
	}
}

// resolveFrom resolves HOST/x:v1 as a pull does, with credentials (which a
// realm would receive), and explains the error as a pull would.
func resolveFrom(t *testing.T, r *Registry, host string) error {
	t.Helper()
	ref, err := ParseRef(host + "/x:v1")
	if err != nil {
		t.Fatal(err)
	}
	res, done := r.resolver(ref.Host, Auth{Username: "u", Password: "secret"}, nil)
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, _, err := res.Resolve(ctx, ref.Name); err != nil {
		return r.explain(ref, err)
	}
	return nil
}

func newReg(t *testing.T, cfg Config) *Registry {
	t.Helper()
	cfg.Timeout = 5 * time.Second
	r, err := New(nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func wantRefused(t *testing.T, err error, tr *trap, words ...string) {
	t.Helper()
	if n := tr.conns.Load(); n != 0 {
		t.Errorf("the trap at %s got %d connections; want none", tr.host(), n)
	}
	if err == nil || !errdefs.IsFailedPrecondition(err) {
		t.Fatalf("got %v; want failed_precondition naming %q", err, words)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not name %q", err, w)
		}
	}
}

// An HTTPS registry may not send boxd to plain HTTP, by a redirect or a
// realm, even to a host boxd speaks plain HTTP to.
func TestGuardNoDowngrade(t *testing.T) {
	for _, how := range []string{"redirect", "realm"} {
		t.Run(how, func(t *testing.T) {
			tr := newTrap(t, false)
			target := "http://" + tr.host() + "/v2/x/manifests/v1"
			answer := redirectTo(target)
			if how == "realm" {
				target = "http://" + tr.host() + "/token"
				answer = realmAt(target)
			}
			reg := hostile(t, true, answer)
			r := newReg(t, Config{CAs: []string{caFile(t, reg)}, Insecure: []string{tr.host()}})
			err := resolveFrom(t, r, reg.Listener.Addr().String())
			wantRefused(t, err, tr, target, "plain HTTP after HTTPS")
		})
	}
}

// A registry may not send boxd to an address in the always-blocked set (a
// second loopback port here) by a redirect or a bearer realm, by address
// or by name, unless --insecure-registry names that host.
func TestGuardBlockedTargets(t *testing.T) {
	for _, tc := range []struct{ name, how, host string }{
		{"redirect to an address", "redirect", "127.0.0.1"},
		{"redirect to a name", "redirect", "localhost"},
		{"realm at an address", "realm", "127.0.0.1"},
		{"realm at a name", "realm", "localhost"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTrap(t, true)
			_, port, _ := net.SplitHostPort(tr.host())
			target := "https://" + net.JoinHostPort(tc.host, port) + "/v2/x/manifests/v1"
			answer := redirectTo(target)
			if tc.how == "realm" {
				target = "https://" + net.JoinHostPort(tc.host, port) + "/token"
				answer = realmAt(target)
			}
			reg := hostile(t, false, answer)
			r := newReg(t, Config{CAs: []string{caFile(t, tr.Server)}, Insecure: []string{reg.Listener.Addr().String()}})
			err := resolveFrom(t, r, reg.Listener.Addr().String())
			wantRefused(t, err, tr, target, "loopback", "--insecure-registry")
		})
	}
}

// A name that passes the check by name and resolves to a blocked address
// at the dial (DNS rebinding: the lookup here answers a public address,
// the dial's own resolution loopback) is refused before it connects.
func TestGuardDialTimeCheck(t *testing.T) {
	tr := newTrap(t, true)
	_, port, _ := net.SplitHostPort(tr.host())
	target := "https://" + net.JoinHostPort("localhost", port) + "/v2/x/manifests/v1"
	reg := hostile(t, false, redirectTo(target))
	r := newReg(t, Config{CAs: []string{caFile(t, tr.Server)}, Insecure: []string{reg.Listener.Addr().String()}})
	r.lookup = func(context.Context, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("203.0.113.7")}, nil
	}
	err := resolveFrom(t, r, reg.Listener.Addr().String())
	wantRefused(t, err, tr, "connection to localhost:"+port, "loopback")
}

// What the admin named is reached: a redirect to a host named with
// --insecure-registry, and a realm on the registry's own host.
func TestGuardAllowsNamedHosts(t *testing.T) {
	tr := newTrap(t, false)
	reg := hostile(t, false, redirectTo("http://"+tr.host()+"/v2/x/manifests/v1"))
	r := newReg(t, Config{Insecure: []string{reg.Listener.Addr().String(), tr.host()}})
	err := resolveFrom(t, r, reg.Listener.Addr().String())
	if tr.conns.Load() == 0 || !errdefs.IsNotFound(err) {
		t.Errorf("redirect to a named host: %d connections, %v; want the trap's not found", tr.conns.Load(), err)
	}

	var tokens atomic.Int32
	var self *httptest.Server
	self = hostile(t, false, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/token" {
			tokens.Add(1)
			http.Error(w, "no", http.StatusForbidden)
			return
		}
		realmAt(self.URL+"/token")(w, r)
	})
	r = newReg(t, Config{Insecure: []string{self.Listener.Addr().String()}})
	_ = resolveFrom(t, r, self.Listener.Addr().String())
	if tokens.Load() == 0 {
		t.Errorf("the realm on the registry's own host was not asked for a token")
	}
}
