package mcpserver

import (
	"context"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestToolsGoThroughLookup: every registered tool whose input has a
// sandbox_id reaches boxd only through Server.lookup. boxd's socket here
// does not exist, so a call that went through lookup fails with lookup's
// own error ("sandbox <ref>: ..."), and one that skipped it would fail
// with the tool's. The tools without a sandbox_id are exactly the two that
// do not act on an existing sandbox: a new tool that names its sandbox
// some other way fails here. The e2e TestOwnershipMCPSessions performs the
// same calls against a real boxd from another session.
func TestToolsGoThroughLookup(t *testing.T) {
	ctx := context.Background()
	cs := inMemoryClient(t, true)
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var without []string
	for _, tool := range tools.Tools {
		args, ok := argsFor(tool)
		if !ok {
			without = append(without, tool.Name)
			continue
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool.Name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", tool.Name, err)
		}
		msg := ""
		if len(res.Content) > 0 {
			msg = res.Content[0].(*mcp.TextContent).Text
		}
		if !res.IsError || !strings.HasPrefix(msg, "sandbox x: unavailable") {
			t.Errorf("%s %v: %q; want lookup's error (sandbox x: unavailable ...)", tool.Name, args, msg)
		}
	}
	sort.Strings(without)
	if got := strings.Join(without, " "); got != "sandbox_create sandbox_list" {
		t.Errorf("tools without a sandbox_id: %s; want sandbox_create sandbox_list", got)
	}
}

// inMemoryClient is an MCP client session with a server whose boxd socket
// does not exist, joined by in-memory transports and closed when the test
// ends; isolated makes the server's sessions isolated, as over HTTP.
func inMemoryClient(t *testing.T, isolated bool) *mcp.ClientSession {
	t.Helper()
	s, err := New(filepath.Join(t.TempDir(), "no-boxd.sock"), nil)
	if err != nil {
		t.Fatal(err)
	}
	s.isolated = isolated
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.mcpServer("test").Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "t"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// argsFor is a valid input for tool with sandbox_id x, false if the tool
// takes no sandbox_id.
func argsFor(tool *mcp.Tool) (map[string]any, bool) {
	schema, _ := tool.InputSchema.(map[string]any)
	props, _ := schema["properties"].(map[string]any)
	if _, ok := props[sandboxField]; !ok {
		return nil, false
	}
	args := map[string]any{}
	required, _ := schema["required"].([]any)
	for _, r := range required {
		name := r.(string)
		switch p, _ := props[name].(map[string]any); p["type"] {
		case "string":
			args[name] = "y"
		case "integer", "number":
			args[name] = 1
		case "boolean":
			args[name] = false
		case "array":
			args[name] = []any{}
		}
	}
	args[sandboxField] = "x"
	if tool.Name == "exec" || tool.Name == "process_start" {
		args["command"] = "true"
	}
	return args, true
}
