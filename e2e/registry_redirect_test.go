//go:build linux

package e2e

import (
	"archive/tar"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"connectrpc.com/connect"

	"github.com/boxd-dev/boxd/internal/rpcclient"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// redirectTrap is a second loopback listener, not named to boxd, that a
// hostile registry sends boxd to; it counts the connections it accepts.
type redirectTrap struct {
	srv   *httptest.Server
	conns atomic.Int32
}

func newRedirectTrap(t *testing.T, ca *testCA) *redirectTrap {
	t.Helper()
	tr := &redirectTrap{}
	tr.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "trap", http.StatusNotFound)
	}))
	tr.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			tr.conns.Add(1)
		}
	}
	if ca != nil {
		tr.srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.cert}}
		tr.srv.StartTLS()
	} else {
		tr.srv.Start()
	}
	t.Cleanup(tr.srv.Close)
	return tr
}

func (tr *redirectTrap) host() string { return tr.srv.Listener.Addr().String() }
func (tr *redirectTrap) port() string { _, p, _ := net.SplitHostPort(tr.host()); return p }

// TestRegistryRedirectSSRF: a registry boxd is told to reach (a plain-HTTP
// one on a loopback port named with --insecure-registry, and an HTTPS one
// on loopback trusted with --registry-ca) tries to send boxd's pulls and
// pushes to another loopback port, which stands for any service of the
// host: by a redirect of the manifest or of a blob, by its bearer realm
// (which would get the caller's password), by an upload location, by
// name as well as by address, and from HTTPS down to plain HTTP. The
// second listener sees no connection, and each call fails with
// failed_precondition naming where the registry sent boxd and why not;
// nothing of the pull is left. The same boxd then pulls from an honest
// registry.
func TestRegistryRedirectSSRF(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir)
	hello := fakeImage(t, layerTar(t, tar.Header{Name: "hello", Typeflag: tar.TypeReg, Mode: 0o644, Size: 5}))

	tr := newRedirectTrap(t, nil)    // plain HTTP, loopback, never named
	trTLS := newRedirectTrap(t, &ca) // HTTPS with a trusted certificate, never named
	named := newRedirectTrap(t, nil) // plain HTTP, named insecure: only the downgrade is wrong
	var attack atomic.Pointer[func(http.ResponseWriter, *http.Request) bool]
	hostile := httptest.NewServer(fakeHandler(func(w http.ResponseWriter, r *http.Request) bool {
		return (*attack.Load())(w, r)
	}, hello))
	t.Cleanup(hostile.Close)
	hostileHost := strings.TrimPrefix(hostile.URL, "http://")
	hostileTLS := fakeRegistry(t, ca, func(w http.ResponseWriter, r *http.Request) bool {
		return (*attack.Load())(w, r)
	}, hello)
	honest := httptest.NewServer(fakeHandler(nil, hello))
	t.Cleanup(honest.Close)
	honestHost := strings.TrimPrefix(honest.URL, "http://")

	d := startBoxd(t, namespace+"-regssrf", true, "--registry-ca", ca.caFile, "--registry-timeout", registryTimeout.String(),
		"--insecure-registry", hostileHost, "--insecure-registry", honestHost, "--insecure-registry", named.host())
	reg := rpcclient.NewRegistry(d.sock)

	redirect := func(pathPrefix, to string) func(http.ResponseWriter, *http.Request) bool {
		return func(w http.ResponseWriter, r *http.Request) bool {
			if !strings.HasPrefix(r.URL.Path, pathPrefix) {
				return false
			}
			http.Redirect(w, r, to, http.StatusTemporaryRedirect)
			return true
		}
	}
	realm := func(at string) func(http.ResponseWriter, *http.Request) bool {
		return func(w http.ResponseWriter, r *http.Request) bool {
			w.Header().Set("WWW-Authenticate", `Bearer realm="`+at+`",service="reg",scope="repository:e2e/x:pull,push"`)
			w.WriteHeader(http.StatusUnauthorized)
			return true
		}
	}
	uploadAt := func(to string) func(http.ResponseWriter, *http.Request) bool {
		return func(w http.ResponseWriter, r *http.Request) bool {
			switch {
			case r.Method == http.MethodHead:
				http.NotFound(w, r) // nothing is there yet: upload everything
			case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/blobs/uploads/"):
				w.Header().Set("Location", to)
				w.WriteHeader(http.StatusAccepted)
			default:
				return false
			}
			return true
		}
	}
	auth := &boxdv1.RegistryAuth{Username: "victim", Password: "not-for-the-trap"}
	for _, tc := range []struct {
		name, registry string
		attack         func(http.ResponseWriter, *http.Request) bool
		trap           *redirectTrap
		push           bool
		words          []string
	}{
		{"manifest redirect to loopback", hostileHost, redirect("/v2/e2e/x/manifests/", "https://127.0.0.1:"+trTLS.port()+"/m"), trTLS, false,
			[]string{"redirect", "https://127.0.0.1:" + trTLS.port() + "/m", "loopback", "--insecure-registry"}},
		{"manifest redirect by name", hostileHost, redirect("/v2/e2e/x/manifests/", "https://localhost:"+trTLS.port()+"/m"), trTLS, false,
			[]string{"redirect", "https://localhost:" + trTLS.port() + "/m", "loopback"}},
		{"blob redirect to loopback", hostileHost, redirect("/v2/e2e/x/blobs/", "https://127.0.0.1:"+trTLS.port()+"/b"), trTLS, false,
			[]string{"redirect", "https://127.0.0.1:" + trTLS.port() + "/b", "loopback"}},
		{"plain-HTTP redirect to a port not named", hostileHost, redirect("/v2/e2e/x/manifests/", "http://127.0.0.1:"+tr.port()+"/m"), tr, false,
			[]string{"redirect", "http://127.0.0.1:" + tr.port() + "/m", "not named with --insecure-registry"}},
		{"bearer realm on loopback", hostileHost, realm("https://127.0.0.1:" + trTLS.port() + "/token"), trTLS, false,
			[]string{"bearer realm https://127.0.0.1:" + trTLS.port() + "/token", "loopback"}},
		{"HTTPS to HTTP redirect", hostileTLS, redirect("/v2/e2e/x/manifests/", "http://"+named.host()+"/m"), named, false,
			[]string{"redirect", "http://" + named.host() + "/m", "plain HTTP after HTTPS"}},
		{"HTTPS registry, HTTP realm", hostileTLS, realm("http://" + named.host() + "/token"), named, false,
			[]string{"bearer realm http://" + named.host() + "/token", "plain HTTP after HTTPS"}},
		{"push upload location on loopback", hostileHost, uploadAt("https://127.0.0.1:" + trTLS.port() + "/upload"), trTLS, true,
			[]string{"https://127.0.0.1:" + trTLS.port() + "/upload", "loopback"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			attack.Store(&tc.attack)
			tc.trap.conns.Store(0)
			before := readStoreState(t, d.c)
			ref := tc.registry + "/e2e/x:v1"
			var err error
			if tc.push {
				_, stderr, code := d.boxctl("image", "push", "--from", testImage, ref)
				if code == 0 {
					t.Fatalf("push to a registry that sends the upload to loopback succeeded")
				}
				if !strings.Contains(stderr, "failed_precondition") {
					t.Errorf("push: %s; want failed_precondition", stderr)
				}
				err = connect.NewError(connect.CodeFailedPrecondition, errString(stderr))
			} else {
				_, _, err = pullAPI(d.c, reg, &boxdv1.PullImageRequest{Reference: ref, Auth: auth})
				if connect.CodeOf(err) != connect.CodeFailedPrecondition {
					t.Errorf("pull: %v; want failed_precondition", err)
				}
				wantNothingLeft(t, tc.name, d.c, before)
			}
			if n := tc.trap.conns.Load(); n != 0 {
				t.Errorf("the listener at %s, which no flag names, got %d connections from boxd", tc.trap.host(), n)
			}
			for _, w := range tc.words {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v does not name %q", err, w)
				}
			}
		})
	}

	t.Run("HonestRegistry", func(t *testing.T) {
		im, _, err := pullAPI(d.c, reg, &boxdv1.PullImageRequest{Reference: honestHost + "/e2e/x:v1"})
		if err != nil || im.Digest != hello.mDigest.String() {
			t.Fatalf("pull from an honest registry: %v %v", im, err)
		}
	})
}

type errString string

func (e errString) Error() string { return string(e) }
