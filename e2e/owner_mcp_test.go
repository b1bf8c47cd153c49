//go:build linux

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"sort"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// TestOwnershipMCPSessions is TestOwnership's attack between two MCP
// sessions on one `boxctl mcp --http-socket`. boxd cannot keep them apart:
// both reach it as the user who runs boxctl mcp. Session b performs every
// tool that takes a sandbox_id (enumerated from the server's own tool
// list) on session a's sandbox, by id and by name, with arguments that
// would work for a; each answer must be the one for an id that does not
// exist, and a's sandbox, file and process must be untouched. b's list
// must not show a's sandbox, nor may b list all. With --shared-sessions,
// b reaches a's sandbox as before.
func TestOwnershipMCPSessions(t *testing.T) {
	t.Run("isolated", func(t *testing.T) {
		path, _ := mcpHTTPServer(t, 10*time.Minute)
		a, b := mcpHTTPSession(t, path), mcpHTTPSession(t, path)
		defer a.Close()
		defer b.Close()
		id, name := mcpVictim(t, a)

		tools, err := b.ListTools(ctx(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		// sandbox_delete last: should it get through, the rest still
		// show what they would reach.
		sort.SliceStable(tools.Tools, func(i, j int) bool {
			return tools.Tools[j].Name == "sandbox_delete" && tools.Tools[i].Name != "sandbox_delete"
		})
		var without []string
		for _, tool := range tools.Tools {
			if !hasSandboxID(tool) {
				without = append(without, tool.Name)
				continue
			}
			args := mcpAttackArgs(tool.Name)
			missing := made(t, id)
			for ref, fake := range map[string]string{id: missing, name: "no-such-" + name} {
				got, isErr := tryCall(t, b, tool.Name, with(args, ref))
				want, wantErr := tryCall(t, b, tool.Name, with(args, fake))
				got, want = strings.ReplaceAll(got, ref, "REF"), strings.ReplaceAll(want, fake, "REF")
				if !isErr || !wantErr || got != want || !strings.Contains(got, "not_found") {
					t.Errorf("session b: %s on a's sandbox %s: error=%v %q; want the answer for a missing one: error=%v %q",
						tool.Name, ref, isErr, got, wantErr, want)
				}
			}
		}
		sort.Strings(without)
		if got := strings.Join(without, " "); got != "sandbox_create sandbox_list" {
			t.Errorf("tools without a sandbox_id: %s; the attack above covers only tools that take one", got)
		}

		// The official TypeScript SDK's client tries the same as a third
		// session (testdata/mcp-node/http-intruder.mjs).
		out := runNodeMCPClient(t, "http-intruder.mjs", path, id, name)
		if !bytes.Contains(out, []byte(`"exec"`)) || !bytes.Contains(out, []byte(`"sandbox_delete"`)) {
			t.Errorf("node intruder attacked too little: %s", out)
		}

		// a's sandbox is as a left it: b's write, edit, exec, kill and
		// delete reached nothing.
		if _, out := call(t, a, "read_file", map[string]any{"sandbox_id": id, "path": "secret.txt"}, false); out["content"] != "a's secret\n" {
			t.Errorf("a's file after b's attempts: %v", out)
		}
		if text, _ := call(t, a, "exec", map[string]any{"sandbox_id": id, "command": "ls /tmp"}, false); strings.Contains(text, "pwned") {
			t.Errorf("b's exec ran in a's sandbox: %s", text)
		}
		if _, out := call(t, a, "process_read", map[string]any{"sandbox_id": id, "process_id": "p1"}, false); out["state"] != "running" {
			t.Errorf("a's process after b's process_kill: %v", out)
		}

		if _, out := call(t, b, "sandbox_list", nil, false); len(out["sandboxes"].([]any)) != 0 {
			t.Errorf("session b lists a's sandbox: %v", out)
		}
		if text, _ := call(t, b, "sandbox_list", map[string]any{"all": true}, true); !strings.Contains(text, "all:") || strings.Contains(text, id) {
			t.Errorf("session b's sandbox_list all: %s; want refused naming all", text)
		}
		// b's own sandbox is b's to use, and a cannot reach it either.
		_, own := call(t, b, "sandbox_create", map[string]any{"ttl": "10m"}, false)
		bid := own["id"].(string)
		defer env.api.DeleteSandbox(context.Background(), connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: bid}))
		call(t, b, "exec", map[string]any{"sandbox_id": bid, "command": "true"}, false)
		if text, _ := call(t, a, "exec", map[string]any{"sandbox_id": bid, "command": "true"}, true); !strings.Contains(text, "not_found") {
			t.Errorf("session a's exec in b's sandbox: %s", text)
		}
	})

	t.Run("shared", func(t *testing.T) {
		path, _ := mcpHTTPServer(t, 10*time.Minute, "--shared-sessions")
		a, b := mcpHTTPSession(t, path), mcpHTTPSession(t, path)
		defer a.Close()
		defer b.Close()
		id, name := mcpVictim(t, a)
		if text, out := call(t, b, "exec", map[string]any{"sandbox_id": name, "command": "cat secret.txt"}, false); out["stdout"] != "a's secret\n" {
			t.Errorf("session b's exec in a's sandbox with --shared-sessions: %s", text)
		}
		if _, out := call(t, b, "sandbox_list", map[string]any{"all": true}, false); !strings.Contains(fmtAny(out), id) {
			t.Errorf("session b's sandbox_list all with --shared-sessions lacks %s: %v", id, out)
		}
	})
}

// mcpVictim has session a create a named sandbox with a file and a
// running process p1, deleted when the test ends.
func mcpVictim(t *testing.T, a *mcp.ClientSession) (id, name string) {
	t.Helper()
	name = "victim-" + made(t, "0123456789ab")
	_, sb := call(t, a, "sandbox_create", map[string]any{"name": name, "ttl": "10m"}, false)
	id = sb["id"].(string)
	t.Cleanup(func() {
		env.api.DeleteSandbox(context.Background(), connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: id}))
	})
	call(t, a, "write_file", map[string]any{"sandbox_id": id, "path": "secret.txt", "content": "a's secret\n"}, false)
	if _, out := call(t, a, "process_start", map[string]any{"sandbox_id": id, "args": []string{"sleep", "600"}}, false); out["process_id"] != "p1" {
		t.Fatalf("a's process: %v", out)
	}
	return id, name
}

// mcpAttackArgs are arguments to tool that would succeed on a's sandbox
// (mcpVictim's), so only the ownership check stands in b's way.
func mcpAttackArgs(tool string) map[string]any {
	switch tool {
	case "exec", "process_start":
		return map[string]any{"command": "touch /tmp/pwned"}
	case "read_file":
		return map[string]any{"path": "secret.txt"}
	case "write_file":
		return map[string]any{"path": "secret.txt", "content": "b was here\n"}
	case "edit_file":
		return map[string]any{"path": "secret.txt", "old_text": "secret", "new_text": "b"}
	case "list_files":
		return map[string]any{"path": "."}
	case "process_read", "process_kill":
		return map[string]any{"process_id": "p1"}
	case "run_code":
		return map[string]any{"code": "open('/tmp/pwned', 'w')"}
	}
	return map[string]any{} // process_list, sandbox_delete, and any new tool
}

func hasSandboxID(tool *mcp.Tool) bool {
	schema, _ := tool.InputSchema.(map[string]any)
	props, _ := schema["properties"].(map[string]any)
	_, ok := props["sandbox_id"]
	return ok
}

func with(args map[string]any, ref string) map[string]any {
	out := map[string]any{"sandbox_id": ref}
	for k, v := range args {
		out[k] = v
	}
	return out
}

// made is a random hex string as long as like, for ids that do not exist.
func made(t *testing.T, like string) string {
	t.Helper()
	b := make([]byte, (len(like)+1)/2)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)[:len(like)]
}

// tryCall runs a tool and returns its text and whether it is an error.
func tryCall(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (string, bool) {
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
	return text.String(), res.IsError
}

func fmtAny(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
