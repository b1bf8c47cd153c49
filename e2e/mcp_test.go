//go:build linux

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/boxd-dev/boxd/internal/testenv"
	"github.com/boxd-dev/boxd/mcpserver"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// mcpSession starts `boxctl mcp` (through the front, as a client config
// would) and connects the MCP Go SDK's own client to it over stdio.
func mcpSession(t *testing.T) *mcp.ClientSession {
	t.Helper()
	cs, _ := mcpCommand(t)
	return cs
}

// mcpCommand is mcpSession that also returns the boxctl process.
func mcpCommand(t *testing.T) (*mcp.ClientSession, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command(env.boxctl, "--socket", env.socket, "mcp")
	client := mcp.NewClient(&mcp.Implementation{Name: "boxd-e2e", Version: "test"}, nil)
	cs, err := client.Connect(ctx(t), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to boxctl mcp: %v", err)
	}
	return cs, cmd
}

// call runs a tool and returns its text and structured result; a tool
// error fails the test unless wantErr.
func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, wantErr bool) (string, map[string]any) {
	t.Helper()
	res, err := cs.CallTool(ctx(t), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error: %v", name, err)
	}
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	if res.IsError != wantErr {
		t.Fatalf("%s %v: IsError=%v, want %v: %s", name, args, res.IsError, wantErr, text.String())
	}
	var out map[string]any
	if res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(b, &out)
	}
	return text.String(), out
}

// TestMCPConversation: a real MCP client lists boxctl mcp's tools, each
// with a documented input schema, and holds the conversation an agent
// would: create, exec, write, read, edit, list, delete.
func TestMCPConversation(t *testing.T) {
	cs := mcpSession(t)
	defer cs.Close()

	tools, err := cs.ListTools(ctx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
		if tool.Description == "" {
			t.Errorf("tool %s has no description", tool.Name)
		}
		schema, _ := tool.InputSchema.(map[string]any)
		props, _ := schema["properties"].(map[string]any)
		for pname, p := range props {
			if d, _ := p.(map[string]any)["description"].(string); d == "" {
				t.Errorf("tool %s: input %s has no description", tool.Name, pname)
			}
		}
	}
	sort.Strings(names)
	if got, want := strings.Join(names, " "), "edit_file exec list_files process_kill process_list process_read process_start read_file run_code sandbox_create sandbox_delete sandbox_diff sandbox_list write_file"; got != want {
		t.Errorf("tools: %s, want %s", got, want)
	}

	text, sb := call(t, cs, "sandbox_create", map[string]any{"memory": "128m", "ttl": "10m"}, false)
	id, _ := sb["id"].(string)
	if id == "" || !strings.Contains(text, id) {
		t.Fatalf("create: %s %v", text, sb)
	}
	defer env.api.DeleteSandbox(context.Background(), connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: id}))
	g, err := env.api.GetSandbox(ctx(t), connect.NewRequest(&boxdv1.GetSandboxRequest{Id: id}))
	if err != nil || g.Msg.Sandbox.Labels[mcpserver.SessionLabel] == "" {
		t.Fatalf("sandbox %s lacks the %s label: %v %v", id, mcpserver.SessionLabel, g, err)
	}

	text, out := call(t, cs, "exec", map[string]any{"sandbox_id": id, "command": "echo hello; echo oops >&2; exit 3"}, false)
	if !strings.Contains(text, "exit code: 3") || !strings.Contains(text, "hello") || !strings.Contains(text, "oops") || out["exit_code"] != float64(3) {
		t.Errorf("exec: %s %v", text, out)
	}
	text, out = call(t, cs, "exec", map[string]any{"sandbox_id": id, "args": []string{"sleep", "30"}, "timeout_seconds": 1}, false)
	if !strings.Contains(text, "[timed out") || out["exit_code"] != float64(124) || out["timed_out"] != true {
		t.Errorf("exec past its timeout: %s %v", text, out)
	}
	text, out = call(t, cs, "exec", map[string]any{"sandbox_id": id, "command": "yes | head -c 100000", "output_limit_bytes": 1000}, false)
	if !strings.Contains(text, "[output truncated") || out["truncated"] != true || len(out["stdout"].(string)) > 1000 {
		t.Errorf("exec over its output cap: %d bytes, %v", len(text), out["truncated"])
	}
	call(t, cs, "exec", map[string]any{"sandbox_id": id, "command": "true", "args": []string{"true"}}, true)

	call(t, cs, "write_file", map[string]any{"sandbox_id": id, "path": "/workspace/src/main.py", "content": "print('hello')\nprint('world')\n"}, false)
	text, out = call(t, cs, "read_file", map[string]any{"sandbox_id": id, "path": "src/main.py"}, false)
	if out["content"] != "print('hello')\nprint('world')\n" || text != out["content"] {
		t.Errorf("read back: %q %v", text, out)
	}
	text, _ = call(t, cs, "list_files", map[string]any{"sandbox_id": id, "path": "/workspace", "depth": 2}, false)
	if !strings.Contains(text, "dir") || !strings.Contains(text, "src/main.py") {
		t.Errorf("list_files: %s", text)
	}
	text, _ = call(t, cs, "edit_file", map[string]any{"sandbox_id": id, "path": "src/main.py", "old_text": "print(", "new_text": "echo("}, true) // twice: refused
	if !strings.Contains(text, "occurs 2 times") || !strings.Contains(text, "nothing changed") {
		t.Errorf("ambiguous edit: %s", text)
	}
	text, out = call(t, cs, "edit_file", map[string]any{"sandbox_id": id, "path": "src/main.py", "old_text": "'world'", "new_text": "'mcp'"}, false)
	if out["replacements"] != float64(1) || out["line"] != float64(2) || !strings.Contains(text, "line 2") {
		t.Errorf("edit: %s %v", text, out)
	}
	text, _ = call(t, cs, "exec", map[string]any{"sandbox_id": id, "args": []string{"cat", "src/main.py"}}, false)
	if !strings.Contains(text, "print('hello')\nprint('mcp')\n") {
		t.Errorf("after edit: %s", text)
	}
	call(t, cs, "write_file", map[string]any{"sandbox_id": id, "path": "bin.dat", "content": "/w==", "base64": true}, false)
	text, out = call(t, cs, "read_file", map[string]any{"sandbox_id": id, "path": "bin.dat"}, false)
	if out["encoding"] != "base64" || out["content"] != "/w==" || !strings.Contains(text, "not UTF-8") {
		t.Errorf("binary read: %s %v", text, out)
	}
	text, _ = call(t, cs, "read_file", map[string]any{"sandbox_id": id, "path": "no/such/file"}, true)
	if !strings.Contains(text, "not_found") {
		t.Errorf("missing file: %s", text)
	}

	text, out = call(t, cs, "sandbox_list", nil, false)
	if !strings.Contains(text, id) || len(out["sandboxes"].([]any)) != 1 {
		t.Errorf("list: %s %v", text, out)
	}
	call(t, cs, "sandbox_delete", map[string]any{"sandbox_id": id}, false)
	if _, err := env.api.GetSandbox(ctx(t), connect.NewRequest(&boxdv1.GetSandboxRequest{Id: id})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("after sandbox_delete: %v, want not_found", err)
	}
}

// TestMCPCleanupOnEOF: when the client goes away (stdin closes), boxctl
// mcp deletes the sandboxes its session created, but not one created with
// keep.
func TestMCPCleanupOnEOF(t *testing.T) {
	cs := mcpSession(t)
	_, gone := call(t, cs, "sandbox_create", map[string]any{}, false)
	_, kept := call(t, cs, "sandbox_create", map[string]any{"keep": true}, false)
	goneID, keptID := gone["id"].(string), kept["id"].(string)
	defer env.api.DeleteSandbox(context.Background(), connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: goneID}))
	defer env.api.DeleteSandbox(context.Background(), connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: keptID}))

	start := time.Now()
	if err := cs.Close(); err != nil { // closes boxctl's stdin and waits for it to exit
		t.Errorf("close: %v", err)
	}
	if _, err := env.api.GetSandbox(ctx(t), connect.NewRequest(&boxdv1.GetSandboxRequest{Id: goneID})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("sandbox of the ended session: %v, want not_found", err)
	}
	g, err := env.api.GetSandbox(ctx(t), connect.NewRequest(&boxdv1.GetSandboxRequest{Id: keptID}))
	if err != nil || g.Msg.Sandbox.Labels[mcpserver.KeepLabel] != "true" {
		t.Errorf("kept sandbox: %v %v", g, err)
	}
	t.Logf("session ended and cleaned up in %v", time.Since(start))
}

// TestMCPCleanupOnSignal: SIGTERM (a host stopping its MCP servers) cleans
// up as the end of stdin does.
func TestMCPCleanupOnSignal(t *testing.T) {
	cs, cmd := mcpCommand(t)
	defer cs.Close()
	_, sb := call(t, cs, "sandbox_create", map[string]any{}, false)
	id, _ := sb["id"].(string)
	defer env.api.DeleteSandbox(context.Background(), connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: id}))
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := env.api.GetSandbox(ctx(t), connect.NewRequest(&boxdv1.GetSandboxRequest{Id: id}))
		if connect.CodeOf(err) == connect.CodeNotFound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s still there 30s after SIGTERM: %v", id, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestMCPProcesses: background processes through MCP: start, read while
// it runs, wait for its exit, and kill one that would run on.
func TestMCPProcesses(t *testing.T) {
	cs := mcpSession(t)
	defer cs.Close()
	_, sb := call(t, cs, "sandbox_create", map[string]any{}, false)
	id, _ := sb["id"].(string)
	defer env.api.DeleteSandbox(context.Background(), connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: id}))

	text, p := call(t, cs, "process_start", map[string]any{"sandbox_id": id, "command": "echo start; sleep 1; echo done; echo bad >&2; exit 5"}, false)
	pid, _ := p["process_id"].(string)
	if pid == "" || !strings.Contains(text, "started process "+pid) {
		t.Fatalf("process_start: %s %v", text, p)
	}
	text, out := call(t, cs, "process_read", map[string]any{"sandbox_id": id, "process_id": pid}, false)
	if out["state"] != "running" {
		t.Errorf("read at once: %s", text)
	}
	text, out = call(t, cs, "process_read", map[string]any{"sandbox_id": id, "process_id": pid, "wait_seconds": 30}, false)
	if out["state"] != "exited" || out["exit_code"] != float64(5) || out["stdout"] != "start\ndone\n" || out["stderr"] != "bad\n" || !strings.Contains(text, "exit code 5") {
		t.Errorf("read after its exit: %s %v", text, out)
	}

	_, p = call(t, cs, "process_start", map[string]any{"sandbox_id": id, "args": []string{"sh", "-c", "seq 1 20000; sleep 100"}}, false)
	long, _ := p["process_id"].(string)
	start := time.Now()
	text, out = call(t, cs, "process_read", map[string]any{"sandbox_id": id, "process_id": long, "wait_seconds": 1, "output_limit_bytes": 100}, false)
	if out["state"] != "running" || time.Since(start) > 10*time.Second {
		t.Errorf("read with a wait shorter than the process: %v after %v", out["state"], time.Since(start))
	}
	if !strings.HasSuffix(out["stdout"].(string), "19999\n20000\n") || len(out["stdout"].(string)) != 100 || !strings.Contains(text, "[output truncated") {
		t.Errorf("the end of the output, 100 bytes: %q; text %q", out["stdout"], text)
	}
	call(t, cs, "process_kill", map[string]any{"sandbox_id": id, "process_id": long}, false)
	_, out = call(t, cs, "process_read", map[string]any{"sandbox_id": id, "process_id": long, "wait_seconds": 10}, false)
	if out["state"] != "exited" {
		t.Errorf("after process_kill: %v", out)
	}
	text, out = call(t, cs, "process_list", map[string]any{"sandbox_id": id}, false)
	if len(out["processes"].([]any)) != 2 || !strings.Contains(text, pid) || !strings.Contains(text, long) {
		t.Errorf("process_list: %s", text)
	}
	call(t, cs, "process_read", map[string]any{"sandbox_id": id, "process_id": "p999"}, true)
}

// TestMCPNodeClient: the official TypeScript SDK's client, which this
// project did not write, holds the same conversation (testdata/mcp-node).
func TestMCPNodeClient(t *testing.T) {
	out := runNodeMCPClient(t, "client.mjs", env.boxctl, env.socket)
	t.Logf("node client: %s", bytes.TrimSpace(out))
}

// runNodeMCPClient runs testdata/mcp-node/SCRIPT with node and args, next
// to the npm packages of the committed lockfile so its imports resolve,
// and returns its output once it has reported "ok":true.
func runNodeMCPClient(t *testing.T, script string, args ...string) []byte {
	t.Helper()
	src, err := filepath.Abs(filepath.Join("testdata", "mcp-node"))
	if err != nil {
		t.Fatal(err)
	}
	mods, err := testenv.NodeModules(src)
	if err != nil {
		t.Fatalf("npm packages: %v", err)
	}
	dir := t.TempDir()
	scripts, _ := filepath.Glob(filepath.Join(src, "*.mjs")) // the script and what it imports
	for _, f := range scripts {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), text, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(mods, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(cctx, "node", append([]string{filepath.Join(dir, script)}, args...)...).CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte(`"ok":true`)) {
		t.Fatalf("node MCP client %s: %v\n%s", script, err, out)
	}
	return out
}
