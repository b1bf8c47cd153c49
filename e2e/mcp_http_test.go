//go:build linux

package e2e

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/boxd-dev/boxd/mcpserver"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// mcpHTTPServer starts `boxctl mcp --http-socket` (through the front),
// with extra flags if any, and waits for its socket.
func mcpHTTPServer(t *testing.T, idle time.Duration, extra ...string) (string, *exec.Cmd) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mcp.sock")
	args := append([]string{"--socket", env.socket, "mcp", "--http-socket", path, "--idle-timeout", idle.String()}, extra...)
	cmd := exec.Command(env.boxctl, args...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if c, err := net.Dial("unix", path); err == nil {
			_ = c.Close()
			return path, cmd
		}
		if time.Now().After(deadline) {
			t.Fatalf("boxctl mcp --http-socket never listened on %s", path)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// mcpHTTPSession connects the Go SDK's streamable HTTP client over the socket.
func mcpHTTPSession(t *testing.T, path string) *mcp.ClientSession {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	}}}
	client := mcp.NewClient(&mcp.Implementation{Name: "boxd-e2e-http", Version: "test"}, nil)
	cs, err := client.Connect(ctx(t), &mcp.StreamableClientTransport{Endpoint: "http://localhost/mcp", HTTPClient: hc}, nil)
	if err != nil {
		t.Fatalf("connect to boxctl mcp --http-socket: %v", err)
	}
	return cs
}

// waitGone waits until sandbox id is not_found.
func waitGone(t *testing.T, id, why string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := env.api.GetSandbox(ctx(t), connect.NewRequest(&boxdv1.GetSandboxRequest{Id: id}))
		if connect.CodeOf(err) == connect.CodeNotFound {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s still there 30s after %s: %v", id, why, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func sessionOf(t *testing.T, id string) string {
	t.Helper()
	g, err := env.api.GetSandbox(ctx(t), connect.NewRequest(&boxdv1.GetSandboxRequest{Id: id}))
	if err != nil {
		t.Fatalf("sandbox %s: %v", id, err)
	}
	return g.Msg.Sandbox.Labels[mcpserver.SessionLabel]
}

// TestMCPHTTP: MCP's streamable HTTP transport on a Unix socket, driven by
// the Go SDK's client. Each session has its own label; a session's
// sandboxes go when it ends (the client's DELETE, the idle timeout for a
// client that vanished, or the server stopping), except kept ones.
func TestMCPHTTP(t *testing.T) {
	path, cmd := mcpHTTPServer(t, 3*time.Second)
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket %s: %v, mode %v; want 0600", path, err, fi.Mode().Perm())
	}

	a := mcpHTTPSession(t, path)
	tools, err := a.ListTools(ctx(t), nil)
	if err != nil || len(tools.Tools) != 14 {
		t.Fatalf("tools: %v %v", tools, err)
	}
	_, sb := call(t, a, "sandbox_create", map[string]any{"memory": "128m", "ttl": "10m"}, false)
	id, _ := sb["id"].(string)
	defer env.api.DeleteSandbox(context.Background(), connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: id}))
	text, out := call(t, a, "exec", map[string]any{"sandbox_id": id, "command": "echo over-http; exit 3"}, false)
	if out["exit_code"] != float64(3) || !strings.Contains(text, "over-http") {
		t.Errorf("exec: %s %v", text, out)
	}
	call(t, a, "write_file", map[string]any{"sandbox_id": id, "path": "x.txt", "content": "http\n"}, false)
	if _, out = call(t, a, "read_file", map[string]any{"sandbox_id": id, "path": "x.txt"}, false); out["content"] != "http\n" {
		t.Errorf("read back: %v", out)
	}
	call(t, a, "sandbox_delete", map[string]any{"sandbox_id": id}, false)
	waitGone(t, id, "sandbox_delete")

	_, gone := call(t, a, "sandbox_create", map[string]any{}, false)
	_, kept := call(t, a, "sandbox_create", map[string]any{"keep": true}, false)
	goneID, keptID := gone["id"].(string), kept["id"].(string)
	defer env.api.DeleteSandbox(context.Background(), connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: goneID}))
	defer env.api.DeleteSandbox(context.Background(), connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: keptID}))

	// A second client at the same time is a session of its own, and one
	// that vanishes (sends nothing more) is ended by the idle timeout.
	b := mcpHTTPSession(t, path)
	defer b.Close()
	_, idle := call(t, b, "sandbox_create", map[string]any{}, false)
	idleID := idle["id"].(string)
	defer env.api.DeleteSandbox(context.Background(), connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: idleID}))
	if sa, sb := sessionOf(t, goneID), sessionOf(t, idleID); sa == "" || sa == sb {
		t.Errorf("two HTTP sessions share the label %s=%q/%q", mcpserver.SessionLabel, sa, sb)
	}
	// b's list sees only b's sandboxes.
	if _, out := call(t, b, "sandbox_list", nil, false); len(out["sandboxes"].([]any)) != 1 {
		t.Errorf("session b lists %v", out)
	}

	if err := a.Close(); err != nil { // DELETE: the session ends
		t.Errorf("close: %v", err)
	}
	waitGone(t, goneID, "the client ended its session")
	if g, err := env.api.GetSandbox(ctx(t), connect.NewRequest(&boxdv1.GetSandboxRequest{Id: keptID})); err != nil || g.Msg.Sandbox.Labels[mcpserver.KeepLabel] != "true" {
		t.Errorf("kept sandbox: %v %v", g, err)
	}
	waitGone(t, idleID, "the idle timeout (3s) of a silent client")

	// Stopping the server ends the sessions still open.
	c := mcpHTTPSession(t, path)
	defer c.Close()
	_, last := call(t, c, "sandbox_create", map[string]any{}, false)
	lastID := last["id"].(string)
	defer env.api.DeleteSandbox(context.Background(), connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: lastID}))
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitGone(t, lastID, "SIGTERM to boxctl mcp --http-socket")
	if err := cmd.Wait(); err != nil {
		t.Errorf("boxctl mcp --http-socket after SIGTERM: %v", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("socket %s left behind: %v", path, err)
	}
}

// TestMCPHTTPNodeClient: the official TypeScript SDK's streamable HTTP
// client holds the conversation over the Unix socket
// (testdata/mcp-node/http-client.mjs); ending its session deletes the
// sandbox it left.
func TestMCPHTTPNodeClient(t *testing.T) {
	path, _ := mcpHTTPServer(t, 10*time.Minute)
	out := runNodeMCPClient(t, "http-client.mjs", path)
	t.Logf("node client: %s", bytes.TrimSpace(out))
	m := regexpLeft.FindSubmatch(out)
	if m == nil {
		t.Fatalf("no left sandbox in %s", out)
	}
	left := string(m[1])
	defer env.api.DeleteSandbox(context.Background(), connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: left}))
	waitGone(t, left, "the node client ended its session")
}

var regexpLeft = regexp.MustCompile(`"left":"([0-9a-f]+)"`)
