//go:build linux

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/boxd-dev/boxd/internal/audit"
	"github.com/boxd-dev/boxd/rpc/apiwire"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
)

// remoteAPI is a SandboxService client of a TLS listener that presents
// token (none if empty) from the local address from.
func remoteAPI(t *testing.T, caPath, url, token, from string) boxdv1connect.SandboxServiceClient {
	t.Helper()
	pemBytes, err := os.ReadFile(caPath)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemBytes)
	proto := new(http.Protocols)
	proto.SetHTTP2(true)
	d := &net.Dialer{}
	if from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, Protocols: proto, DialContext: d.DialContext}
	var rt http.RoundTripper = tr
	if token != "" {
		rt = headerRT{"Bearer " + token, tr}
	}
	return boxdv1connect.NewSandboxServiceClient(apiwire.ClientOver(rt), url)
}

type headerRT struct {
	auth string
	next http.RoundTripper
}

func (h headerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", h.auth)
	return h.next.RoundTrip(r)
}

// boxctlHost runs boxctl (the front binary, which must hand off) against
// a TCP listener with the token in BOXD_TOKEN.
func boxctlHost(url, caPath, token string, stdin string, args ...string) (string, string, int) {
	cmd := exec.Command(env.boxctl, append([]string{"--host", url, "--tls-ca", caPath}, args...)...)
	// No socket: a command that ran on a local socket would fail.
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/", "BOXD_SOCKET=/nonexistent/boxd.sock", apiwire.TokenEnv + "=" + token}
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		code = -1
	}
	return stdout.String(), stderr.String(), code
}

// TestRemoteTLS: boxd on a TLS listener on loopback; boxctl --host with a
// token creates, execs and moves files; the token's owner is the caller
// (ownership as on the socket, audit naming the token); bad tokens are
// unauthenticated; scopes bound calls; tokens survive a restart and a
// revoked one is refused on its next call.
func TestRemoteTLS(t *testing.T) {
	sockGroup, adminGroup, ua, ub, _ := hostUsers(t)
	dir := t.TempDir()
	ca := newTestCA(t, dir)
	caPath, certPath, keyPath := ca.caFile, ca.certFile, ca.keyFile
	port, metricsAddr := fmt.Sprint(freePort(t)), fmt.Sprintf("127.0.0.1:%d", freePort(t))
	url := "https://127.0.0.1:" + port
	d := startBoxd(t, "boxd-e2e-remote", true, "--socket-group", sockGroup, "--admin-group", adminGroup,
		"--listen", "tcp://127.0.0.1:"+port, "--metrics-listen", metricsAddr,
		"--tls-cert", certPath, "--tls-key", keyPath)
	mint := func(name, owner, scope string, extra ...string) string {
		t.Helper()
		out, stderr, code := d.boxctl(append([]string{"token", "create", name, "--owner", owner, "--scope", scope}, extra...)...)
		if code != 0 || !strings.HasPrefix(out, "boxd_") {
			t.Fatalf("token create %s: %d %q %s", name, code, out, stderr)
		}
		return strings.TrimSpace(out)
	}
	tokA, tokB := mint("ta", ua.name, "write"), mint("tb", ub.name, "write")
	tokRead, tokOld := mint("tread", ua.name, "read"), mint("old", ua.name, "write", "--ttl", "1h")

	t.Run("cli", func(t *testing.T) { remoteCLI(t, url, caPath, tokA, ua) })
	api := remoteAPI(t, caPath, url, tokA, "")
	created, err := api.CreateSandbox(d.c, connect.NewRequest(&boxdv1.CreateSandboxRequest{}))
	if err != nil {
		t.Fatalf("create over TLS: %v", err)
	}
	sbA := created.Msg.Sandbox.Id
	if created.Msg.Sandbox.OwnerUid != ua.uid {
		t.Errorf("owner of a's sandbox: %d, want %d", created.Msg.Sandbox.OwnerUid, ua.uid)
	}
	t.Run("other-owner", func(t *testing.T) { remoteOtherOwner(t, d, caPath, url, tokB, sbA) })
	t.Run("bad-tokens", func(t *testing.T) { remoteBadTokens(t, d, caPath, url, tokA) })
	t.Run("read-scope", func(t *testing.T) {
		r := remoteAPI(t, caPath, url, tokRead, "")
		if _, err := r.GetSandbox(d.c, connect.NewRequest(&boxdv1.GetSandboxRequest{Id: sbA})); err != nil {
			t.Errorf("read token: get: %v", err)
		}
		_, err := r.Exec(d.c, connect.NewRequest(&boxdv1.ExecRequest{SandboxId: sbA, Args: []string{"true"}}))
		wantCodeAll(t, "read token: exec", err, connect.CodePermissionDenied, "scope", "read")
		_, err = r.DeleteSandbox(d.c, connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: sbA}))
		wantCodeAll(t, "read token: delete", err, connect.CodePermissionDenied, "scope", "read")
	})
	t.Run("non-admin-tokens", func(t *testing.T) {
		bin := userCopy(t, d)
		_, stderr, code, _ := boxctlAs(t, bin, ua, d.sock, "token", "create", "x", "--owner", ub.name)
		if code == 0 || !strings.Contains(stderr, "permission_denied") || !strings.Contains(stderr, "owner") {
			t.Errorf("a makes b's token: %d %s", code, stderr)
		}
		_, stderr, code, _ = boxctlAs(t, bin, ua, d.sock, "token", "create", "x", "--scope", "admin")
		if code == 0 || !strings.Contains(stderr, "permission_denied") || !strings.Contains(stderr, "scope") {
			t.Errorf("a makes an admin token: %d %s", code, stderr)
		}
		out, stderr, code, _ := boxctlAs(t, bin, ua, d.sock, "token", "ls")
		if code != 0 || !strings.Contains(out, "ta") || strings.Contains(out, "tb") {
			t.Errorf("a's token ls: %d %q %s", code, out, stderr)
		}
	})
	t.Run("metrics", func(t *testing.T) { remoteMetrics(t, d, caPath, "https://"+metricsAddr+"/metrics", tokA) })
	remoteRestart(t, d, caPath, url, tokA, tokOld, ua)
	remoteAudit(t, d, ua, sbA)
}

// userCopy copies the CLI (and the full CLI next to it) into d's
// directory, which the test users can reach, as the socket.
func userCopy(t *testing.T, d *daemon) string {
	t.Helper()
	if err := os.Chmod(filepath.Dir(d.dir), 0o711); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"boxctl", "boxctl-full"} {
		if b, err := os.ReadFile(filepath.Join(filepath.Dir(env.boxctl), name)); err != nil || os.WriteFile(filepath.Join(d.dir, name), b, 0o755) != nil {
			t.Fatalf("copy %s: %v", name, err)
		}
	}
	return filepath.Join(d.dir, "boxctl")
}

func remoteCLI(t *testing.T, url, caPath, tok string, ua hostUser) {
	id, stderr, code := boxctlHost(url, caPath, tok, "", "create")
	id = strings.TrimSpace(id)
	if code != 0 || id == "" {
		t.Fatalf("boxctl --host create: %d %q %s", code, id, stderr)
	}
	if out, stderr, code := boxctlHost(url, caPath, tok, "", "exec", id, "--", "echo", "over", "tls"); code != 0 || out != "over tls\n" {
		t.Errorf("boxctl --host exec: %d %q %s", code, out, stderr)
	}
	if _, stderr, code := boxctlHost(url, caPath, tok, "payload", "files", "write", id, "/tmp/f"); code != 0 {
		t.Errorf("files write: %d %s", code, stderr)
	}
	if out, stderr, code := boxctlHost(url, caPath, tok, "", "files", "cat", id, "/tmp/f"); code != 0 || out != "payload" {
		t.Errorf("files cat: %d %q %s", code, out, stderr)
	}
	out, stderr, code := boxctlHost(url, caPath, tok, "", "ls")
	if code != 0 || !strings.Contains(out, id) || !strings.Contains(out, ua.name) {
		t.Errorf("ls over TLS: %d %q %s", code, out, stderr)
	}
	// No token: the CLI says so and reaches no socket.
	if _, stderr, code := boxctlHost(url, caPath, "", "", "ls"); code == 0 || !strings.Contains(stderr, "token") {
		t.Errorf("--host without a token: %d %s", code, stderr)
	}
}

func remoteOtherOwner(t *testing.T, d *daemon, caPath, url, tokB, sbA string) {
	b := remoteAPI(t, caPath, url, tokB, "")
	const missing = "0123456789ab"
	_, want := b.GetSandbox(d.c, connect.NewRequest(&boxdv1.GetSandboxRequest{Id: missing}))
	if connect.CodeOf(want) != connect.CodeNotFound {
		t.Fatalf("missing sandbox: %v", want)
	}
	calls := map[string]func(string) error{
		"get": func(id string) error {
			_, err := b.GetSandbox(d.c, connect.NewRequest(&boxdv1.GetSandboxRequest{Id: id}))
			return err
		},
		"exec": func(id string) error {
			_, err := b.Exec(d.c, connect.NewRequest(&boxdv1.ExecRequest{SandboxId: id, Args: []string{"true"}}))
			return err
		},
		"delete": func(id string) error {
			_, err := b.DeleteSandbox(d.c, connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: id}))
			return err
		},
	}
	for name, call := range calls {
		wantErr, gotErr := call(missing), call(sbA)
		if connect.CodeOf(gotErr) != connect.CodeNotFound || strings.ReplaceAll(wantErr.Error(), missing, sbA) != gotErr.Error() {
			t.Errorf("b's token, %s of a's sandbox: %v; a missing one: %v", name, gotErr, wantErr)
		}
	}
	ls, err := b.ListSandboxes(d.c, connect.NewRequest(&boxdv1.ListSandboxesRequest{}))
	if err != nil || slices.ContainsFunc(ls.Msg.Sandboxes, func(s *boxdv1.Sandbox) bool { return s.Id == sbA }) {
		t.Errorf("b's ls over TLS shows a's sandbox: %v", err)
	}
}

func remoteBadTokens(t *testing.T, d *daemon, caPath, url, good string) {
	cases := map[string]string{
		"none":      "",
		"wrong":     "boxd_" + strings.Repeat("A", 43),
		"malformed": "not a token at all",
		"truncated": good[:len(good)-1],
		"long":      good + strings.Repeat("x", 1000),
		"over-long": good + strings.Repeat("x", 1<<20),
	}
	for name, tok := range cases {
		// Each from an address of its own, so the failures do not add up
		// to the per-address limit.
		api := remoteAPI(t, caPath, url, tok, "127.0.0.3")
		_, err := api.ListSandboxes(d.c, connect.NewRequest(&boxdv1.ListSandboxesRequest{}))
		if name == "over-long" && connect.CodeOf(err) != connect.CodeUnauthenticated {
			// A header past the server's limit may be refused by HTTP
			// itself (431): never let in.
			if err == nil {
				t.Errorf("over-long token let in")
			}
			continue
		}
		wantCodeAll(t, name+" token", err, connect.CodeUnauthenticated)
	}
}

// remoteRestart: tokens outlive boxd; an expired one (its expiry moved
// into the past in boxd's file while boxd is down) and a revoked one are
// refused.
func remoteRestart(t *testing.T, d *daemon, caPath, url, tokA, tokOld string, ua hostUser) {
	d.kill()
	path := filepath.Join(d.dir, "state", "tokens.json")
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v %v", st, err)
	}
	b, _ := os.ReadFile(path)
	if strings.Contains(string(b), tokA) || strings.Contains(string(b), tokA[5:]) {
		t.Fatal("the token file holds a secret")
	}
	var recs []map[string]any
	if err := json.Unmarshal(b, &recs); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r["name"] == "old" {
			r["expires"] = time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
		}
	}
	b, _ = json.Marshal(recs)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	d.start(t)
	a := remoteAPI(t, caPath, url, tokA, "")
	if _, err := a.ListSandboxes(d.c, connect.NewRequest(&boxdv1.ListSandboxesRequest{})); err != nil {
		t.Fatalf("a's token after a restart: %v", err)
	}
	_, err = remoteAPI(t, caPath, url, tokOld, "127.0.0.4").ListSandboxes(d.c, connect.NewRequest(&boxdv1.ListSandboxesRequest{}))
	wantCodeAll(t, "expired token", err, connect.CodeUnauthenticated)
	out, stderr, code := d.boxctl("token", "ls")
	if code != 0 || !strings.Contains(out, "ta") || !strings.Contains(out, ua.name) {
		t.Errorf("token ls: %d %q %s", code, out, stderr)
	}
	if _, stderr, code := d.boxctl("token", "rm", "ta", "--owner", ua.name); code != 0 {
		t.Fatalf("token rm: %d %s", code, stderr)
	}
	_, err = a.ListSandboxes(d.c, connect.NewRequest(&boxdv1.ListSandboxesRequest{}))
	wantCodeAll(t, "revoked token, kept connection", err, connect.CodeUnauthenticated)
}

// remoteAudit: the calls made with a's token are in the audit log as a's,
// naming the token.
func remoteAudit(t *testing.T, d *daemon, ua hostUser, sbA string) {
	f, err := os.Open(filepath.Join(d.dir, "state", audit.FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	found := false
	for sc.Scan() {
		var e audit.Entry
		if json.Unmarshal(sc.Bytes(), &e) == nil && e.Sandbox == sbA && e.UID == int64(ua.uid) && e.Token == "ta" && e.Result == "ok" {
			found = true
		}
	}
	if !found {
		t.Errorf("no audit line of a's create naming token ta")
	}
}

// TestRemoteListenRefused: plain TCP off loopback is refused at start,
// before boxd touches anything.
func TestRemoteListenRefused(t *testing.T) {
	for _, args := range [][]string{
		{"--listen", fmt.Sprintf("tcp://0.0.0.0:%d", freePort(t))},
		{"--listen", fmt.Sprintf("tcp://localhost:%d", freePort(t))},
		{"--listen", "unix:///tmp/x"},
	} {
		c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		out, err := exec.CommandContext(c, env.boxd, append([]string{"--socket", filepath.Join(t.TempDir(), "s.sock"),
			"--state-dir", t.TempDir(), "--containerd", "/nonexistent.sock"}, args...)...).CombinedOutput()
		cancel()
		if err == nil || !strings.Contains(string(out), "--listen") {
			t.Errorf("boxd %v: %v %s", args, err, out)
		}
	}
}

// TestRemoteAuthFlood: 1,000 failed authentications from one address get
// it refused and do not slow a valid caller from another.
func TestRemoteAuthFlood(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir)
	caPath, certPath, keyPath := ca.caFile, ca.certFile, ca.keyFile
	port := fmt.Sprint(freePort(t))
	url := "https://127.0.0.1:" + port
	d := startBoxd(t, "boxd-e2e-remote-flood", false, "--listen", "tcp://127.0.0.1:"+port, "--tls-cert", certPath, "--tls-key", keyPath)
	out, stderr, code := d.boxctl("token", "create", "ok")
	if code != 0 {
		t.Fatalf("token create: %s", stderr)
	}
	good := remoteAPI(t, caPath, url, strings.TrimSpace(out), "127.0.0.1")
	list := func() time.Duration {
		start := time.Now()
		if _, err := good.ListSandboxes(d.c, connect.NewRequest(&boxdv1.ListSandboxesRequest{})); err != nil {
			t.Fatalf("valid caller: %v", err)
		}
		return time.Since(start)
	}
	median := func(n int) time.Duration {
		var ds []time.Duration
		for range n {
			ds = append(ds, list())
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return ds[n/2]
	}
	before := median(50)
	bad := remoteAPI(t, caPath, url, "boxd_wrong", "127.0.0.2")
	done := make(chan []connect.Code)
	go func() {
		var codes []connect.Code
		for range 1000 {
			_, err := bad.ListSandboxes(d.c, connect.NewRequest(&boxdv1.ListSandboxesRequest{}))
			codes = append(codes, connect.CodeOf(err))
		}
		done <- codes
	}()
	during := median(50)
	codes := <-done
	for i, c := range codes {
		if c != connect.CodeUnauthenticated {
			t.Fatalf("bad call %d: %v", i, c)
		}
	}
	_, err := bad.ListSandboxes(d.c, connect.NewRequest(&boxdv1.ListSandboxesRequest{}))
	wantCodeAll(t, "flooding address", err, connect.CodeUnauthenticated, "too many failed authentications")
	// Only the failures before the block are audited: a flood cannot
	// rotate the audit log's earlier lines away.
	b, err := os.ReadFile(filepath.Join(d.dir, "state", audit.FileName))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), `"result":"unauthenticated"`); n < 10 || n > 20 {
		t.Errorf("%d audit lines of unauthenticated calls after 1,001 from one address, want about 10", n)
	}
	t.Logf("valid caller's ListSandboxes median: %v before, %v during 1,000 failed authentications from another address", before, during)
	if during > 5*before+20*time.Millisecond {
		t.Errorf("valid caller slowed: %v before, %v during the flood", before, during)
	}
}

// remoteMetrics: the metrics listener (TLS, as the API's) serves a
// metrics token only, and counts the creates and execs made above.
func remoteMetrics(t *testing.T, d *daemon, caPath, url, tokA string) {
	out, stderr, code := d.boxctl("token", "create", "prom", "--scope", "metrics")
	if code != 0 {
		t.Fatalf("metrics token: %s", stderr)
	}
	pemBytes, _ := os.ReadFile(caPath)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemBytes)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 30 * time.Second}
	get := func(token string) (int, string) {
		req, _ := http.NewRequest("GET", url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("scrape: %v", err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if c, _ := get(""); c != http.StatusUnauthorized {
		t.Errorf("scrape without a token: %d", c)
	}
	if c, _ := get(tokA); c != http.StatusForbidden {
		t.Errorf("scrape with a write token: %d", c)
	}
	c, body := get(strings.TrimSpace(out))
	for _, want := range []string{`boxd_sandbox_creates_total{code="ok"}`, `boxd_call_duration_seconds_count{op="exec"}`,
		`boxd_call_duration_seconds_count{op="create"}`, `boxd_sandboxes{runtime="runc",state="running"}`,
		`boxd_api_calls_total{code="permission_denied",method="Exec",service="SandboxService"}`, "go_goroutines"} {
		if c != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("metrics (%d) lack %s", c, want)
		}
	}
}
