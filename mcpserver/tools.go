package mcpserver

import (
	"context"
	"fmt"
	"strings"

	"connectrpc.com/connect"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// Inputs: the jsonschema tags are the descriptions a client shows the
// model; fields with omitempty are optional.

type createIn struct {
	Image   string   `json:"image,omitempty" jsonschema:"image to start from, e.g. boxd/debian:bookworm; empty: the daemon's default image"`
	Memory  string   `json:"memory,omitempty" jsonschema:"memory limit, e.g. 256m or 1g; empty: the daemon's default"`
	CPUs    float64  `json:"cpus,omitempty" jsonschema:"CPU quota in cores, e.g. 1.5; 0: the daemon's default"`
	TTL     string   `json:"ttl,omitempty" jsonschema:"lifetime as a Go duration, e.g. 30m or 1h, after which boxd deletes the sandbox; empty: the daemon's default"`
	Name    string   `json:"name,omitempty" jsonschema:"optional unique name, usable instead of the id"`
	Env     []string `json:"env,omitempty" jsonschema:"environment of every command, as KEY=VALUE"`
	Workdir string   `json:"workdir,omitempty" jsonschema:"working directory of commands and relative paths; default /workspace"`
	Keep    bool     `json:"keep,omitempty" jsonschema:"keep the sandbox when this MCP session ends; by default it is deleted then"`
}

type sandboxOut struct {
	ID      string            `json:"id" jsonschema:"sandbox id"`
	Name    string            `json:"name,omitempty"`
	Image   string            `json:"image"`
	State   string            `json:"state"`
	Labels  map[string]string `json:"labels,omitempty"`
	Expires string            `json:"expires_at,omitempty" jsonschema:"when boxd deletes it (RFC 3339)"`
}

type listIn struct {
	All bool `json:"all,omitempty" jsonschema:"list every sandbox of this user on this boxd, not only those this session created; refused by an HTTP server that keeps its sessions apart"`
}

type listOut struct {
	Sandboxes []sandboxOut `json:"sandboxes"`
}

type idIn struct {
	SandboxID string `json:"sandbox_id" jsonschema:"id or name of the sandbox"`
}

type empty struct{}

func sandboxOf(sb *boxdv1.Sandbox) sandboxOut {
	return sandboxOut{ID: sb.GetId(), Name: sb.GetName(), Image: sb.GetImage(), State: sb.GetState(), Labels: sb.GetLabels(), Expires: sb.GetExpiresAt()}
}

func (s *Server) addTools(srv *mcp.Server) {
	addTool(s, srv, &mcp.Tool{
		Name:        "sandbox_create",
		Description: "Create an isolated Linux sandbox (no network) and return its id. Commands and files then refer to it by sandbox_id.",
	}, s.create)
	addTool(s, srv, &mcp.Tool{
		Name:        "sandbox_list",
		Description: "List the sandboxes this session created (or, with all, every sandbox on this boxd).",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, s.list)
	addTool(s, srv, &mcp.Tool{
		Name:        "sandbox_delete",
		Description: "Delete a sandbox and everything in it.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true)},
	}, s.delete)
	s.addExec(srv)
	s.addFiles(srv)
	s.addProcesses(srv)
}

func ptr[T any](v T) *T { return &v }

func (s *Server) create(ctx context.Context, _ *mcp.CallToolRequest, in createIn) (*mcp.CallToolResult, sandboxOut, error) {
	labels := map[string]string{SessionLabel: s.session}
	if in.Keep {
		labels[KeepLabel] = "true"
	}
	req := &boxdv1.CreateSandboxRequest{Image: in.Image, Env: in.Env, Workdir: in.Workdir, Labels: labels, Name: in.Name, Ttl: in.TTL}
	if in.Memory != "" || in.CPUs != 0 {
		req.Limits = &boxdv1.Limits{Memory: in.Memory, Cpus: in.CPUs}
	}
	resp, err := s.api.CreateSandbox(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, sandboxOut{}, describe("create sandbox", err)
	}
	sb := resp.Msg.GetSandbox()
	s.remember(sb.GetId(), in.Keep)
	fate := "it is deleted when this MCP session ends"
	if in.Keep {
		fate = "it is kept after this MCP session ends"
	}
	if sb.GetExpiresAt() != "" {
		fate += "; boxd deletes it at " + sb.GetExpiresAt() + " in any case"
	}
	return text(fmt.Sprintf("created sandbox %s (image %s, workdir %s); %s", sb.GetId(), sb.GetImage(), sb.GetWorkdir(), fate)), sandboxOf(sb), nil
}

func (s *Server) list(ctx context.Context, _ *mcp.CallToolRequest, in listIn) (*mcp.CallToolResult, listOut, error) {
	if in.All && s.isolated {
		return nil, listOut{}, fmt.Errorf("all: this MCP server keeps its sessions apart, so a session lists only the sandboxes it created (start boxctl mcp with --shared-sessions to share them)")
	}
	req := &boxdv1.ListSandboxesRequest{}
	if !in.All {
		req.Labels = map[string]string{SessionLabel: s.session}
	}
	resp, err := s.api.ListSandboxes(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, listOut{}, describe("list sandboxes", err)
	}
	out := listOut{Sandboxes: []sandboxOut{}}
	var b strings.Builder
	for _, sb := range resp.Msg.GetSandboxes() {
		if s.isolated && !s.owns(sb.GetId()) {
			continue // the label alone could be set by any client of this user
		}
		out.Sandboxes = append(out.Sandboxes, sandboxOf(sb))
		fmt.Fprintf(&b, "%s\t%s\t%s\t%s\n", sb.GetId(), sb.GetState(), sb.GetImage(), sb.GetName())
	}
	if len(out.Sandboxes) == 0 {
		return text("no sandboxes"), out, nil
	}
	return text("ID\tSTATE\tIMAGE\tNAME\n" + b.String()), out, nil
}

func (s *Server) delete(ctx context.Context, _ *mcp.CallToolRequest, in idIn) (*mcp.CallToolResult, empty, error) {
	// Resolve a name to the id this session remembers (lookup has done
	// so already when the server keeps its sessions apart).
	id := in.SandboxID
	if g, err := s.api.GetSandbox(ctx, connect.NewRequest(&boxdv1.GetSandboxRequest{Id: id})); err == nil {
		id = g.Msg.GetSandbox().GetId()
	}
	if _, err := s.api.DeleteSandbox(ctx, connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: id})); err != nil {
		return nil, empty{}, describe("delete sandbox "+in.SandboxID, err)
	}
	s.forget(id)
	return text("deleted sandbox " + in.SandboxID), empty{}, nil
}
