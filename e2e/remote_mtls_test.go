//go:build linux

package e2e

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/boxd-dev/boxd/internal/audit"
	"github.com/boxd-dev/boxd/rpc/apiwire"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
)

// clientCA issues client certificates for the mutual TLS tests.
type clientCA struct {
	name string
	file string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	dir  string
	n    int64
}

func newClientCA(t *testing.T, dir, name string) *clientCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &clientCA{name: name, file: filepath.Join(dir, name+".pem"), cert: cert, key: key, dir: dir, n: 1}
	if err := os.WriteFile(ca.file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return ca
}

// issue makes a client certificate with common name cn and DNS names
// dns, and returns the paths of its certificate and key files.
func (ca *clientCA) issue(t *testing.T, cn string, dns ...string) (string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca.n++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.n), Subject: pkix.Name{CommonName: cn}, DNSNames: dns,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(ca.dir, fmt.Sprintf("%s-%s-%d", ca.name, cn, ca.n))
	if os.WriteFile(base+".crt", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600) != nil ||
		os.WriteFile(base+".key", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600) != nil {
		t.Fatal("write client certificate")
	}
	return base + ".crt", base + ".key"
}

// certAPI is a SandboxService client of a TLS listener that presents the
// client certificate in certFile (none if empty) and token (none if
// empty).
func certAPI(t *testing.T, serverCA, url, certFile, keyFile, token string) boxdv1connect.SandboxServiceClient {
	t.Helper()
	pemBytes, err := os.ReadFile(serverCA)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{RootCAs: x509.NewCertPool()}
	cfg.RootCAs.AppendCertsFromPEM(pemBytes)
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	proto := new(http.Protocols)
	proto.SetHTTP2(true)
	var rt http.RoundTripper = &http.Transport{TLSClientConfig: cfg, Protocols: proto, DialContext: (&net.Dialer{}).DialContext}
	if token != "" {
		rt = headerRT{"Bearer " + token, rt}
	}
	return boxdv1connect.NewSandboxServiceClient(apiwire.ClientOver(rt), url)
}

// TestRemoteClientCert: with --client-ca, a TCP listener requires a client
// certificate of that CA, and a certificate names a caller only through
// --client-cert-map: a mapped certificate is its user with its scope
// (boxctl --host --tls-cert with no token works, ownership and audit as
// for a token); an unmapped one is unauthenticated; another CA's, or
// none, fails the handshake; root's certificate is admin only with scope
// admin; a token presented with a certificate names the caller.
func TestRemoteClientCert(t *testing.T) {
	sockGroup, adminGroup, ua, ub, _ := hostUsers(t)
	dir := t.TempDir()
	srvCA := newTestCA(t, dir)
	ca, other := newClientCA(t, dir, "clients"), newClientCA(t, dir, "stranger-ca")
	certA, keyA := ca.issue(t, "agent-a")
	certB, keyB := ca.issue(t, "ci-b", "b.clients.test")
	certRootWrite, keyRootWrite := ca.issue(t, "root-write")
	certRootAdmin, keyRootAdmin := ca.issue(t, "root-admin")
	certUnmapped, keyUnmapped := ca.issue(t, "nobody-mapped")
	certForeign, keyForeign := other.issue(t, "agent-a") // the right name, the wrong CA
	certMap := filepath.Join(dir, "certmap")
	mapText := fmt.Sprintf("# clients\ncn:agent-a %s write\ndns:b.clients.test %s read\ncn:root-write root write\ncn:root-admin 0 admin\n", ua.name, ub.name)
	if err := os.WriteFile(certMap, []byte(mapText), 0o600); err != nil {
		t.Fatal(err)
	}
	port := fmt.Sprint(freePort(t))
	url := "https://127.0.0.1:" + port
	d := startBoxd(t, "boxd-e2e-mtls", true, "--socket-group", sockGroup, "--admin-group", adminGroup,
		"--listen", "tcp://127.0.0.1:"+port, "--tls-cert", srvCA.certFile, "--tls-key", srvCA.keyFile,
		"--client-ca", ca.file, "--client-cert-map", certMap)

	// boxctl with a certificate and no token: the certificate's user.
	cli := func(cert, key string, args ...string) (string, string, int) {
		cmd := exec.Command(env.boxctl, append([]string{"--host", url, "--tls-ca", srvCA.caFile, "--tls-cert", cert, "--tls-key", key}, args...)...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/", "BOXD_SOCKET=/nonexistent/boxd.sock"}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return stdout.String(), stderr.String(), ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return stdout.String(), stderr.String(), 0
	}
	id, stderr, code := cli(certA, keyA, "create", "--ttl", "10m")
	id = strings.TrimSpace(id)
	if code != 0 || id == "" {
		t.Fatalf("boxctl --host --tls-cert create: %d %q %s", code, id, stderr)
	}
	if out, stderr, code := cli(certA, keyA, "exec", id, "--", "echo", "by", "certificate"); code != 0 || out != "by certificate\n" {
		t.Errorf("exec with a certificate: %d %q %s", code, out, stderr)
	}
	a := certAPI(t, srvCA.caFile, url, certA, keyA, "")
	got, err := a.GetSandbox(d.c, connect.NewRequest(&boxdv1.GetSandboxRequest{Id: id}))
	if err != nil || got.Msg.Sandbox.OwnerUid != ua.uid {
		t.Fatalf("a's sandbox through a's certificate: %v %v, want owner %d", got, err, ua.uid)
	}

	t.Run("read-scope-other-user", func(t *testing.T) {
		b := certAPI(t, srvCA.caFile, url, certB, keyB, "")
		_, err := b.GetSandbox(d.c, connect.NewRequest(&boxdv1.GetSandboxRequest{Id: id}))
		wantCodeAll(t, "b's certificate on a's sandbox", err, connect.CodeNotFound)
		_, err = b.CreateSandbox(d.c, connect.NewRequest(&boxdv1.CreateSandboxRequest{}))
		wantCodeAll(t, "b's read certificate creates", err, connect.CodePermissionDenied, "scope", "read")
	})
	t.Run("unmapped", func(t *testing.T) {
		u := certAPI(t, srvCA.caFile, url, certUnmapped, keyUnmapped, "")
		_, err := u.ListSandboxes(d.c, connect.NewRequest(&boxdv1.ListSandboxesRequest{}))
		wantCodeAll(t, "an unmapped certificate", err, connect.CodeUnauthenticated, "nobody-mapped", "--client-cert-map")
	})
	t.Run("handshake", func(t *testing.T) {
		for name, c := range map[string][2]string{"another CA's certificate": {certForeign, keyForeign}, "no certificate": {"", ""}} {
			api := certAPI(t, srvCA.caFile, url, c[0], c[1], "")
			if _, err := api.GetSandbox(d.c, connect.NewRequest(&boxdv1.GetSandboxRequest{Id: id})); err == nil || connect.CodeOf(err) == connect.CodeNotFound {
				t.Errorf("%s: %v, want the handshake refused", name, err)
			}
		}
	})
	t.Run("root-needs-admin-scope", func(t *testing.T) {
		w := certAPI(t, srvCA.caFile, url, certRootWrite, keyRootWrite, "")
		_, err := w.GetSandbox(d.c, connect.NewRequest(&boxdv1.GetSandboxRequest{Id: id}))
		wantCodeAll(t, "root's write certificate on a's sandbox", err, connect.CodeNotFound)
		adm := certAPI(t, srvCA.caFile, url, certRootAdmin, keyRootAdmin, "")
		if _, err := adm.GetSandbox(d.c, connect.NewRequest(&boxdv1.GetSandboxRequest{Id: id})); err != nil {
			t.Errorf("root's admin certificate on a's sandbox: %v", err)
		}
	})
	t.Run("token-names-caller", func(t *testing.T) {
		out, stderr, code := d.boxctl("token", "create", "tb", "--owner", ub.name, "--scope", "write")
		if code != 0 {
			t.Fatalf("token create: %d %s", code, stderr)
		}
		withTok := certAPI(t, srvCA.caFile, url, certA, keyA, strings.TrimSpace(out))
		_, err := withTok.GetSandbox(d.c, connect.NewRequest(&boxdv1.GetSandboxRequest{Id: id}))
		wantCodeAll(t, "a's certificate with b's token on a's sandbox", err, connect.CodeNotFound)
	})
	t.Run("mcp", func(t *testing.T) { certMCP(t, d, url, srvCA.caFile, certA, keyA, ua) })
	certAudit(t, d, ua, id)
}

// certMCP: boxctl --host with a client certificate serves MCP against the
// TCP listener (no local socket): what the agent creates belongs to the
// certificate's user. The global --tls-cert is the client's, not the MCP
// server's own --tls-cert.
func certMCP(t *testing.T, d *daemon, url, serverCA, cert, key string, ua hostUser) {
	cmd := exec.Command(env.boxctl, "--host", url, "--tls-ca", serverCA, "--tls-cert", cert, "--tls-key", key, "mcp")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/", "BOXD_SOCKET=/nonexistent/boxd.sock"}
	client := mcp.NewClient(&mcp.Implementation{Name: "boxd-e2e", Version: "test"}, nil)
	cs, err := client.Connect(ctx(t), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to boxctl --host mcp: %v", err)
	}
	defer cs.Close()
	_, out := call(t, cs, "sandbox_create", map[string]any{}, false)
	id, _ := out["id"].(string)
	if id == "" {
		t.Fatalf("sandbox_create over --host: %v", out)
	}
	if text, _ := call(t, cs, "exec", map[string]any{"sandbox_id": id, "command": "echo via-mcp"}, false); !strings.Contains(text, "via-mcp") {
		t.Errorf("exec over --host: %q", text)
	}
	got, err := d.api.GetSandbox(d.c, connect.NewRequest(&boxdv1.GetSandboxRequest{Id: id}))
	if err != nil || got.Msg.Sandbox.OwnerUid != ua.uid {
		t.Errorf("the MCP sandbox: %v %v, want owner %d (the certificate's user)", got, err, ua.uid)
	}
}

// certAudit: a's create through a's certificate is audited as a, naming
// the map line that matched.
func certAudit(t *testing.T, d *daemon, ua hostUser, id string) {
	f, err := os.Open(filepath.Join(d.dir, "state", audit.FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e audit.Entry
		if json.Unmarshal(sc.Bytes(), &e) == nil && e.Sandbox == id && e.UID == int64(ua.uid) && e.Token == "cert cn:agent-a" && e.Result == "ok" {
			return
		}
	}
	t.Errorf("no audit line of a's create naming the certificate (cert cn:agent-a)")
}

// TestRemoteClientCertRefused: --client-ca and --client-cert-map are
// checked at start: no TLS, a map without a CA, a CA file with no
// certificate, a map line naming no user or a bad scope.
func TestRemoteClientCertRefused(t *testing.T) {
	dir := t.TempDir()
	srvCA := newTestCA(t, dir)
	ca := newClientCA(t, dir, "clients")
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good", "cn:x root write\n")
	listen := []string{"--listen", fmt.Sprintf("tcp://127.0.0.1:%d", freePort(t))}
	tlsArgs := append(listen, "--tls-cert", srvCA.certFile, "--tls-key", srvCA.keyFile)
	for _, c := range []struct {
		args []string
		want string
	}{
		{append(listen, "--client-ca", ca.file), "need TLS"},
		{append(tlsArgs, "--client-cert-map", good), "give --client-ca"},
		{append(tlsArgs, "--client-ca", good), "no PEM certificate"},
		{append(tlsArgs, "--client-ca", ca.file, "--client-cert-map", write("nouser", "cn:x no-such-user-here write\n")), "no-such-user-here"},
		{append(tlsArgs, "--client-ca", ca.file, "--client-cert-map", write("badscope", "cn:x root owner\n")), "scope \"owner\""},
		{append(tlsArgs, "--client-ca", ca.file, "--client-cert-map", write("badkind", "subject:x root write\n")), "cn:, dns:, email: or uri:"},
	} {
		out, err := exec.Command(env.boxd, append([]string{"--socket", filepath.Join(t.TempDir(), "s.sock"),
			"--state-dir", t.TempDir(), "--containerd", "/nonexistent.sock"}, c.args...)...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.want) {
			t.Errorf("boxd %v: %v, output lacks %q:\n%s", c.args[2:], err, c.want, out)
		}
	}
}
