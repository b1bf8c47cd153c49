//go:build linux

package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/boxd-dev/boxd/internal/testenv"
	"github.com/boxd-dev/boxd/rpc/apiwire"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
)

// recorder is a test host's HTTPS server that remembers the
// Authorization headers it received.
type recorder struct {
	mu   sync.Mutex
	auth []string
}

func (r *recorder) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.auth...)
}

// testTLS makes a CA and a leaf for names under it; it returns the CA's
// PEM and the leaf.
func testTLS(t *testing.T, names ...string) ([]byte, tls.Certificate) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caT := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "e2e upstream CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caT, caT, &caKey.PublicKey, caKey)
	must(t, err)
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	lt := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, lt, ca, &key.PublicKey, caKey)
	must(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// serveTLSRecorder serves HTTPS on addr in netns ns, answering body.
func serveTLSRecorder(t *testing.T, ns, addr string, cert tls.Certificate, body string) *recorder {
	t.Helper()
	rec := &recorder{}
	var ln net.Listener
	var err error
	inNetns(t, ns, func() { ln, err = net.Listen("tcp4", addr) })
	must(t, err)
	srv := &http.Server{TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec.mu.Lock()
			rec.auth = append(rec.auth, r.Header.Get("Authorization"))
			rec.mu.Unlock()
			w.Write([]byte(body))
		})}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	return rec
}

// boxctlIn runs boxctl against e's boxd with stdin.
func (e *egressNet) boxctlIn(stdin string, args ...string) (string, string, int) {
	cmd := exec.Command(env.boxctl, append([]string{"--socket", e.socket}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return stdout.String(), stderr.String(), ee.ExitCode()
	}
	if err != nil {
		return "", err.Error(), -1
	}
	return stdout.String(), stderr.String(), 0
}

func buildSecretClient(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "secretclient")
	cmd := exec.Command("go", "build", "-o", bin, "./e2e/testdata/secretclient")
	cmd.Dir = testenv.RepoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build secretclient: %v\n%s", err, out)
	}
	return bin
}

// TestSecretBroker: a sandbox given a secret holds a placeholder; boxd's
// egress proxy puts the value only into HTTPS requests to the secret's
// host (allowed.test, H1), verified against the test's own CA. The same
// placeholder sent to another allowed host (denied.test, H2), or behind a
// Host that is not the TLS name, arrives unreplaced; a client that pins
// the upstream's CA fails; the value is nowhere in the sandbox, inspect,
// boxd's log or its state but the store; another user can neither use nor
// see the secret; a sandbox's slowloris and huge headers do not hurt boxd.
func TestSecretBroker(t *testing.T) {
	sockGroup, adminGroup, _, ub, _ := hostUsers(t)
	e := newEgressNet(t)
	e.start(t, "--socket-group", sockGroup, "--admin-group", adminGroup)
	t.Cleanup(func() { e.stop(t, 15) })
	must(t, os.Chmod(e.dir, 0o711))
	must(t, os.Chmod(filepath.Dir(e.dir), 0o711))
	e.must(t, "image", "import", "--rootfs", env.busybox, "--name", testImage)

	caPEM, leaf := testTLS(t, "allowed.test", "denied.test")
	h1 := serveTLSRecorder(t, e.h1, h1Addr+":443", leaf, "h1-tls")
	h2 := serveTLSRecorder(t, e.h2, h2Addr+":443", leaf, "h2-tls")
	caFile := filepath.Join(e.dir, "upstream-ca.pem")
	must(t, os.WriteFile(caFile, caPEM, 0o644))
	rnd := make([]byte, 16)
	_, _ = rand.Read(rnd)
	value := "sk-e2e-" + hex.EncodeToString(rnd)

	if _, stderr, code := e.boxctlIn(value+"\n", "secret", "create", "KEY", "--host", "allowed.test", "--format", "Bearer {}",
		"--upstream-ca", caFile); code != 0 {
		t.Fatalf("secret create: exit %d: %s", code, stderr)
	}
	if ls := e.must(t, "secret", "ls"); !strings.Contains(ls, "KEY") || !strings.Contains(ls, "allowed.test") || strings.Contains(ls, value) {
		t.Errorf("secret ls = %q", ls)
	}
	id := e.must(t, "create", "--memory", "64m", "--network", "egress", "--allow", "allowed.test", "--allow", "denied.test",
		"--secret", "KEY=API_KEY")
	t.Cleanup(func() { _, _, _ = e.boxctl("rm", "-f", id) })
	bin := buildSecretClient(t)
	e.must(t, "cp", bin, id+":/tmp/secretclient")
	e.must(t, "exec", id, "--", "chmod", "755", "/tmp/secretclient")
	e.must(t, "cp", caFile, id+":/tmp/upstream-ca.pem")
	run := func(id string, args ...string) string {
		out, _, _ := e.boxctl(append([]string{"exec", "--timeout", "40s", id, "--", "/tmp/secretclient"}, args...)...)
		return strings.TrimSpace(out)
	}
	placeholder := e.must(t, "exec", id, "--", "sh", "-c", "echo $API_KEY")
	if !strings.HasPrefix(placeholder, "boxd-secret-") {
		t.Fatalf("API_KEY in the sandbox = %q, want a placeholder", placeholder)
	}

	t.Run("Brokered", func(t *testing.T) {
		if got := run(id, "get", "https://allowed.test/", "Bearer $API_KEY"); got != "200 h1-tls" {
			t.Fatalf("GET https://allowed.test/ = %q", got)
		}
		if s := h1.seen(); len(s) != 1 || s[0] != "Bearer "+value {
			t.Errorf("allowed.test received %q, want the value", s)
		}
		// Rotation: the next request carries the new value.
		if _, stderr, code := e.boxctlIn(value+"-2", "secret", "rotate", "KEY"); code != 0 {
			t.Fatalf("secret rotate: exit %d: %s", code, stderr)
		}
		run(id, "get", "https://allowed.test/", "Bearer $API_KEY")
		if s := h1.seen(); len(s) != 2 || s[1] != "Bearer "+value+"-2" {
			t.Errorf("allowed.test after rotate received %q", s)
		}
		_, _, _ = e.boxctlIn(value, "secret", "rotate", "KEY")
	})

	t.Run("UnboundHostGetsPlaceholder", func(t *testing.T) {
		if got := run(id, "get", "https://denied.test/", "Bearer $API_KEY", "-extra", "/tmp/upstream-ca.pem"); got != "200 h2-tls" {
			t.Fatalf("GET https://denied.test/ = %q", got)
		}
		if s := h2.seen(); len(s) != 1 || s[0] != "Bearer "+placeholder {
			t.Errorf("denied.test received %q, want the placeholder unreplaced", s)
		}
	})

	t.Run("DomainFronting", func(t *testing.T) {
		n1, n2 := len(h1.seen()), len(h2.seen())
		if got := run(id, "get", "https://allowed.test/", "Bearer $API_KEY", "-host", "denied.test"); !strings.HasPrefix(got, "421") {
			t.Errorf("TLS name allowed.test, Host denied.test: %q, want 421", got)
		}
		if len(h1.seen()) != n1 || len(h2.seen()) != n2 {
			t.Errorf("a fronted request reached an upstream: h1 %q h2 %q", h1.seen(), h2.seen())
		}
	})

	t.Run("PinnedClientFails", func(t *testing.T) {
		n1 := len(h1.seen())
		if got := run(id, "get", "https://allowed.test/", "Bearer $API_KEY", "-only", "/tmp/upstream-ca.pem"); !strings.HasPrefix(got, "ERR") ||
			!strings.Contains(got, "certificate") {
			t.Errorf("a client pinning the upstream's CA: %q, want a certificate error", got)
		}
		if len(h1.seen()) != n1 {
			t.Errorf("the pinned client's request reached allowed.test")
		}
	})

	t.Run("ValueNotInSandbox", func(t *testing.T) {
		// Regular files only: grep would block on a FIFO. The pattern
		// matches the value without holding it (the command line is in
		// /proc too).
		pattern := value[:7] + "[" + value[7:8] + "]" + value[8:]
		out, _, _ := e.boxctl("exec", "--timeout", "60s", id, "--", "sh", "-c",
			"env; cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline; find / /tmp /dev/shm -xdev -type f -exec grep -l -a '"+pattern+"' {} +; true")
		if strings.Contains(out, value) {
			t.Errorf("the value is inside the sandbox")
		}
		if !strings.Contains(out, placeholder) {
			t.Errorf("the sandbox's environment lacks the placeholder")
		}
		insp := e.must(t, "inspect", id)
		if strings.Contains(insp, value) || !strings.Contains(insp, `"secrets"`) || !strings.Contains(insp, "allowed.test") {
			t.Errorf("inspect shows the value, or not the secret's name and host: %s", insp)
		}
		if b, _ := os.ReadFile(e.log); bytes.Contains(b, []byte(value)) {
			t.Errorf("boxd's log holds the value")
		}
		store := filepath.Join(e.stateDir, "secrets")
		_ = filepath.WalkDir(e.stateDir, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || strings.HasPrefix(p, store+"/") || !d.Type().IsRegular() {
				return nil
			}
			if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(value)) {
				t.Errorf("%s holds the value", p)
			}
			return nil
		})
		_ = filepath.WalkDir(store, func(p string, d os.DirEntry, err error) error {
			if fi, _ := d.Info(); err == nil && fi != nil && fi.Mode().Perm()&0o077 != 0 {
				t.Errorf("%s is %v: readable by others", p, fi.Mode())
			}
			return nil
		})
	})

	t.Run("OtherUser", func(t *testing.T) { secretOtherUser(t, e, ub) })

	t.Run("HostileClient", func(t *testing.T) {
		hostile := e.must(t, "create", "--memory", "64m", "--network", "egress", "--allow", "allowed.test", "--secret", "KEY")
		t.Cleanup(func() { _, _, _ = e.boxctl("rm", "-f", hostile) })
		e.must(t, "cp", bin, hostile+":/tmp/secretclient")
		e.must(t, "exec", hostile, "--", "chmod", "755", "/tmp/secretclient")
		// Refused: 431, or the connection closed while the client still
		// wrote.
		if got := run(hostile, "huge", "http://allowed.test/"); got != "431" && !strings.HasPrefix(got, "ERR") {
			t.Errorf("a 1 MiB header: %q, want 431", got)
		}
		// 300 slow connections on each port for 15 s, while the other
		// sandbox's brokered requests and the API carry on.
		e.must(t, "exec", "-d", hostile, "--", "sh", "-c",
			"/tmp/secretclient slow 10.213.0.1:443 300 15 >/tmp/s443 & /tmp/secretclient slow 10.213.0.1:80 300 15 >/tmp/s80; wait")
		time.Sleep(3 * time.Second)
		t0 := time.Now()
		if got := run(id, "get", "https://allowed.test/", "Bearer $API_KEY"); got != "200 h1-tls" {
			t.Errorf("a brokered request during the attack: %q", got)
		}
		if d := time.Since(t0); d > 5*time.Second {
			t.Errorf("a brokered request during the attack took %v", d)
		}
		e.must(t, "ls")
		time.Sleep(16 * time.Second)
		for _, f := range []string{"/tmp/s443", "/tmp/s80"} {
			got := e.must(t, "exec", hostile, "--", "cat", f)
			// Every connection was closed by boxd before the attack's end:
			// refused past the per-sandbox bound, or timed out.
			if !strings.HasPrefix(got, "closed=300 ") {
				t.Errorf("slowloris %s: %q, want all 300 closed by boxd", f, got)
			}
		}
	})
}

// secretOtherUser: user b can neither list, rotate, remove nor use root's
// secret KEY; each is not_found, as a missing name is.
func secretOtherUser(t *testing.T, e *egressNet, ub hostUser) {
	tr := apiwire.Transport(e.socket)
	tr.DialContext = testenv.DialAs(ub.uid, ub.gid, ub.groups, e.socket)
	hc := &http.Client{Transport: tr}
	sec := boxdv1connect.NewSecretServiceClient(hc, "http://boxd")
	sb := boxdv1connect.NewSandboxServiceClient(hc, "http://boxd")
	c := context.Background()
	list, err := sec.ListSecrets(c, connect.NewRequest(&boxdv1.ListSecretsRequest{}))
	must(t, err)
	if len(list.Msg.Secrets) != 0 {
		t.Errorf("user b lists %v", list.Msg.Secrets)
	}
	_, err = sec.RotateSecret(c, connect.NewRequest(&boxdv1.RotateSecretRequest{Name: "KEY", Value: "stolen"}))
	_, errMissing := sec.RotateSecret(c, connect.NewRequest(&boxdv1.RotateSecretRequest{Name: "NOPE", Value: "x"}))
	if connect.CodeOf(err) != connect.CodeNotFound || strings.ReplaceAll(err.Error(), "KEY", "NOPE") != errMissing.Error() {
		t.Errorf("user b rotating root's secret: %v (a missing one: %v)", err, errMissing)
	}
	_, err = sec.RemoveSecret(c, connect.NewRequest(&boxdv1.RemoveSecretRequest{Name: "KEY"}))
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("user b removing root's secret: %v", err)
	}
	_, err = sb.CreateSandbox(c, connect.NewRequest(&boxdv1.CreateSandboxRequest{Network: &boxdv1.NetworkRequest{Mode: "egress",
		Allow: []string{"allowed.test"}}, Secrets: []string{"KEY"}, Limits: &boxdv1.Limits{Memory: "64m"}}))
	if connect.CodeOf(err) != connect.CodeNotFound || !strings.Contains(err.Error(), "secrets[0]") {
		t.Errorf("user b creating with root's secret: %v, want not_found naming secrets[0]", err)
	}
	if ls := e.must(t, "secret", "ls"); !strings.Contains(ls, "KEY") {
		t.Errorf("root's secret is gone after user b's attempts: %q", ls)
	}
}
