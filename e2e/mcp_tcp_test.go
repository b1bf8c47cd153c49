//go:build linux

package e2e

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// mcpTCP is a running `boxctl mcp --http`.
type mcpTCP struct {
	url   string // the endpoint, as the server printed it
	lines chan string
}

// mcpTCPServer starts `boxctl mcp --http ADDR` (through the front) with
// extra flags and waits for the line that names its address.
func mcpTCPServer(t *testing.T, addr string, extra ...string) *mcpTCP {
	t.Helper()
	args := append([]string{"--socket", env.socket, "mcp", "--http", addr, "--idle-timeout", "10m"}, extra...)
	cmd := exec.Command(env.boxctl, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	s := &mcpTCP{lines: make(chan string, 100)}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			os.Stderr.WriteString(sc.Text() + "\n")
			s.lines <- sc.Text()
		}
		close(s.lines)
	}()
	s.url = strings.TrimPrefix(s.line(t, "boxctl mcp: serving MCP on "), "boxctl mcp: serving MCP on ")
	return s
}

// line waits for the next line of the server's stderr that has prefix.
func (s *mcpTCP) line(t *testing.T, prefix string) string {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-s.lines:
			if !ok {
				t.Fatalf("boxctl mcp --http ended before printing %q", prefix)
			}
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-timeout:
			t.Fatalf("boxctl mcp --http printed no %q in 30s", prefix)
		}
	}
}

// bearerTransport adds the bearer token to every request, and nothing
// else: the rest is the MCP SDK's stock streamable client.
type bearerTransport struct {
	token string
	base  http.RoundTripper
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// mcpTCPSession connects the Go SDK's streamable HTTP client with the token.
func mcpTCPSession(t *testing.T, s *mcpTCP, token string, base http.RoundTripper) *mcp.ClientSession {
	t.Helper()
	if base == nil {
		base = http.DefaultTransport
	}
	hc := &http.Client{Transport: bearerTransport{token: token, base: base}}
	client := mcp.NewClient(&mcp.Implementation{Name: "boxd-e2e-tcp", Version: "test"}, nil)
	cs, err := client.Connect(ctx(t), &mcp.StreamableClientTransport{Endpoint: s.url, HTTPClient: hc}, nil)
	if err != nil {
		t.Fatalf("connect to boxctl mcp --http %s: %v", s.url, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// rawInitialize posts an initialize request with the given headers and
// returns the response's status and WWW-Authenticate.
func rawInitialize(t *testing.T, hc *http.Client, endpoint string, headers map[string]string) (int, string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	req, err := http.NewRequestWithContext(ctx(t), http.MethodPost, endpoint, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := hc.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", endpoint, err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	_ = res.Body.Close()
	return res.StatusCode, res.Header.Get("WWW-Authenticate")
}

// TestMCPTCP: `boxctl mcp --http` on loopback with a generated token,
// driven by the Go SDK's stock streamable client with only the bearer
// header added: the conversation works; no token or a wrong one is 401
// with WWW-Authenticate; an Origin other than the server's own is 403
// (DNS rebinding); two sessions are kept apart.
func TestMCPTCP(t *testing.T) {
	s := mcpTCPServer(t, "127.0.0.1:0")
	token := strings.TrimPrefix(s.line(t, "boxctl mcp: bearer token (shown once): "), "boxctl mcp: bearer token (shown once): ")
	if len(token) < 32 {
		t.Fatalf("token %q", token)
	}
	a := mcpTCPSession(t, s, token, nil)
	tools, err := a.ListTools(ctx(t), nil)
	if err != nil || len(tools.Tools) != 14 {
		t.Fatalf("tools: %v %v", tools, err)
	}
	_, sb := call(t, a, "sandbox_create", map[string]any{"memory": "128m", "ttl": "10m"}, false)
	id, _ := sb["id"].(string)
	defer env.api.DeleteSandbox(context.Background(), connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: id}))
	text, out := call(t, a, "exec", map[string]any{"sandbox_id": id, "command": "echo over-tcp; exit 3"}, false)
	if out["exit_code"] != float64(3) || !strings.Contains(text, "over-tcp") {
		t.Errorf("exec: %s %v", text, out)
	}

	u, err := url.Parse(s.url)
	if err != nil {
		t.Fatal(err)
	}
	hc := http.DefaultClient
	if code, wa := rawInitialize(t, hc, s.url, nil); code != http.StatusUnauthorized || !strings.HasPrefix(wa, "Bearer ") {
		t.Errorf("no token: %d, WWW-Authenticate %q; want 401 and a Bearer challenge", code, wa)
	}
	if code, wa := rawInitialize(t, hc, s.url, map[string]string{"Authorization": "Bearer " + token[:len(token)-1] + "x"}); code != http.StatusUnauthorized || !strings.Contains(wa, `error="invalid_token"`) {
		t.Errorf("wrong token: %d, WWW-Authenticate %q; want 401 invalid_token", code, wa)
	}
	if code, _ := rawInitialize(t, hc, s.url, map[string]string{"Authorization": "Basic " + token}); code != http.StatusUnauthorized {
		t.Errorf("token under another scheme: %d, want 401", code)
	}
	good := "Bearer " + token
	// A page of another origin, as a DNS rebinding attacker's page is:
	// refused even with the token (which such a page would not have).
	for _, origin := range []string{"http://evil.example:" + u.Port(), "http://evil.example", "null", "https://127.0.0.1:" + u.Port(), "http://127.0.0.1:1"} {
		if code, _ := rawInitialize(t, hc, s.url, map[string]string{"Authorization": good, "Origin": origin}); code != http.StatusForbidden {
			t.Errorf("Origin %s: %d, want 403", origin, code)
		}
	}
	for _, origin := range []string{"http://127.0.0.1:" + u.Port(), "http://localhost:" + u.Port()} {
		if code, _ := rawInitialize(t, hc, s.url, map[string]string{"Authorization": good, "Origin": origin}); code != http.StatusOK {
			t.Errorf("Origin %s (the server's own): %d, want 200", origin, code)
		}
	}

	// Another session cannot use a's sandbox, by id: not_found, like a
	// missing one; nor see it.
	b := mcpTCPSession(t, s, token, nil)
	if text, isErr := tryCall(t, b, "exec", map[string]any{"sandbox_id": id, "command": "echo stolen"}); !isErr || !strings.Contains(text, "not_found") || strings.Contains(text, "stolen") {
		t.Errorf("session b exec in a's sandbox: error=%v %q; want not_found", isErr, text)
	}
	if _, out := call(t, b, "sandbox_list", nil, false); strings.Contains(fmtAny(out), id) {
		t.Errorf("session b lists %v", out)
	}
}

// TestMCPTCPSharedSessions: with --shared-sessions, sessions over TCP
// share the user's sandboxes, as over the Unix socket.
func TestMCPTCPSharedSessions(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	s := mcpTCPServer(t, "127.0.0.1:0", "--shared-sessions", "--token-out", tokenFile)
	tok, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(tokenFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("--token-out %s: %v, mode %v; want 0600", tokenFile, err, fi.Mode().Perm())
	}
	token := strings.TrimSpace(string(tok))
	a := mcpTCPSession(t, s, token, nil)
	_, sb := call(t, a, "sandbox_create", map[string]any{"memory": "128m", "ttl": "10m"}, false)
	id, _ := sb["id"].(string)
	defer env.api.DeleteSandbox(context.Background(), connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: id}))
	b := mcpTCPSession(t, s, token, nil)
	if text, _ := call(t, b, "exec", map[string]any{"sandbox_id": id, "command": "echo shared"}, false); !strings.Contains(text, "shared") {
		t.Errorf("shared session b exec: %q", text)
	}
}

// TestMCPTCPRefused: what boxctl mcp --http will not start with: an
// address beyond loopback without TLS, a token file others can read or
// that another user owns (each named in the message).
func TestMCPTCPRefused(t *testing.T) {
	dir := t.TempDir()
	open := filepath.Join(dir, "open-token")
	theirs := filepath.Join(dir, "their-token")
	for _, p := range []string{open, theirs} {
		if err := os.WriteFile(p, []byte(strings.Repeat("k", 40)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(open, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(theirs, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--http", "0.0.0.0:0"}, []string{"0.0.0.0:0", "--tls-cert", "--tls-key"}},
		{[]string{"--http", ":0"}, []string{"--tls-cert", "--tls-key"}},
		{[]string{"--http", "127.0.0.1:0", "--token-file", open}, []string{open, "0644"}},
		{[]string{"--http", "127.0.0.1:0", "--token-file", theirs}, []string{theirs, "owned by user 65534"}},
		{[]string{"--http", "127.0.0.1:0", "--tls-cert", open}, []string{"--tls-cert", "--tls-key"}},
	} {
		c2, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		out, err := exec.CommandContext(c2, env.boxctl, append([]string{"--socket", env.socket, "mcp"}, c.args...)...).CombinedOutput()
		timedOut := c2.Err() != nil
		cancel()
		if err == nil || timedOut {
			t.Errorf("boxctl mcp %v: started (%v); want a refusal", c.args, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("boxctl mcp %v: %q does not name %q", c.args, out, w)
			}
		}
	}
}

// TestMCPTCPTLS: with a certificate (self-signed, made here) the server
// speaks HTTPS and the SDK's client holds the conversation over it; a
// client that does not trust the certificate gets nowhere. The token is
// read from a --token-file.
func TestMCPTCPTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := selfSigned(t, dir)
	tokenFile := filepath.Join(dir, "token")
	token := strings.Repeat("0123456789abcdef", 2)
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := mcpTCPServer(t, "127.0.0.1:0", "--tls-cert", certFile, "--tls-key", keyFile, "--token-file", tokenFile)
	if !strings.HasPrefix(s.url, "https://") {
		t.Fatalf("served on %s, want https", s.url)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	a := mcpTCPSession(t, s, token, tr)
	_, sb := call(t, a, "sandbox_create", map[string]any{"memory": "128m", "ttl": "10m"}, false)
	id, _ := sb["id"].(string)
	defer env.api.DeleteSandbox(context.Background(), connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: id}))
	if text, _ := call(t, a, "exec", map[string]any{"sandbox_id": id, "command": "echo over-tls"}, false); !strings.Contains(text, "over-tls") {
		t.Errorf("exec over TLS: %q", text)
	}
	if code, _ := rawInitialize(t, &http.Client{Transport: tr}, s.url, nil); code != http.StatusUnauthorized {
		t.Errorf("no token over TLS: %d, want 401", code)
	}
	if _, err := http.Post(s.url, "application/json", strings.NewReader("{}")); err == nil {
		t.Errorf("a client that does not trust the certificate connected")
	}
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "boxd-e2e"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}
