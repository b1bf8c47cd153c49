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
	createSettings
}

// createSettings are the rest of CreateSandboxRequest's settings, in the
// forms boxctl create takes (sizes "256m", durations "30m").
// sdk/create-options.json maps each to its API field.
type createSettings struct {
	Pids        int64             `json:"pids,omitempty" jsonschema:"maximum number of processes; 0: the daemon's default"`
	Disk        string            `json:"disk,omitempty" jsonschema:"disk cap of the writable layer and /workspace, e.g. 2g (writes past it fail with ENOSPC); empty: the daemon's default"`
	Labels      map[string]string `json:"labels,omitempty" jsonschema:"labels to set on the sandbox, KEY: VALUE (mcp-session and mcp-keep are this server's own)"`
	Network     string            `json:"network,omitempty" jsonschema:"none (the default: loopback only) or egress (only the allow destinations)"`
	Allow       []string          `json:"allow,omitempty" jsonschema:"egress destinations (implies network egress): CIDR[:PORT], NAME[:PORT], *.SUFFIX or *"`
	Publish     []publishIn       `json:"publish,omitempty" jsonschema:"sandbox ports to reach from the host"`
	IdleTimeout string            `json:"idle_timeout,omitempty" jsonschema:"pause or delete (on_idle) the sandbox after this long without an exec or file call, e.g. 15m; 0: never; empty: the daemon's default"`
	OnIdle      string            `json:"on_idle,omitempty" jsonschema:"what the idle timeout does: pause, delete or checkpoint (gvisor: to disk, memory freed, restored by the next call); empty: the daemon's default"`
	Pull        string            `json:"pull,omitempty" jsonschema:"pull the image from its registry first: never (default), missing or always (public images only: no credentials)"`
	User        string            `json:"user,omitempty" jsonschema:"default user of exec and files: NAME, UID, NAME:GROUP or UID:GID; empty: the image's USER, else root"`
	ReadOnly    bool              `json:"read_only,omitempty" jsonschema:"mount the root filesystem read-only (/workspace becomes a tmpfs)"`
	Tmpfs       []string          `json:"tmpfs,omitempty" jsonschema:"tmpfs mounts as PATH[:SIZE], e.g. /cache:64m"`
	Ulimits     []string          `json:"ulimits,omitempty" jsonschema:"rlimits as NAME=VALUE: nofile, nproc, cpu (seconds), fsize (size)"`
	Hostname    string            `json:"hostname,omitempty" jsonschema:"host name (RFC 1123); default the sandbox id"`
	CPUWeight   uint64            `json:"cpu_weight,omitempty" jsonschema:"CPU weight under contention, 1-10000; 0: the default (100)"`
	MemoryLow   string            `json:"memory_low,omitempty" jsonschema:"memory protected from reclaim, e.g. 64m (at most memory)"`
	ExecTimeout string            `json:"exec_timeout,omitempty" jsonschema:"default timeout of exec in this sandbox, e.g. 120s"`
	OutputLimit int64             `json:"output_limit,omitempty" jsonschema:"default output cap of exec in this sandbox, in bytes"`
	Runtime     string            `json:"runtime,omitempty" jsonschema:"runc or gvisor; empty: the daemon's default"`
	Cold        bool              `json:"cold,omitempty" jsonschema:"start from the image even if a warm-pool sandbox could serve the create"`
	Volumes     []string          `json:"volumes,omitempty" jsonschema:"named volumes to mount, each NAME:/PATH or NAME:/PATH:ro"`
	AutoResume  bool              `json:"auto_resume,omitempty" jsonschema:"a call into the sandbox restores it from its checkpoint, or resumes it from a pause, first"`
	Git         string            `json:"git,omitempty" jsonschema:"a public repository to clone into /workspace before the sandbox is handed out: URL or URL#REF (https, http or git; needs network egress allowing the server and an image with git)"`
	GitDepth    uint32            `json:"git_depth,omitempty" jsonschema:"clone only the last N commits; 0: all"`
}

type publishIn struct {
	Port     uint32 `json:"port" jsonschema:"port inside the sandbox"`
	HostPort uint32 `json:"host_port,omitempty" jsonschema:"host port; 0: a free one"`
	HostIP   string `json:"host_ip,omitempty" jsonschema:"host address; default 127.0.0.1"`
	Protocol string `json:"protocol,omitempty" jsonschema:"tcp (the default and only one)"`
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
		Name: "sandbox_create",
		Description: "Create an isolated Linux sandbox and return its id. Commands and files then refer to it by sandbox_id. " +
			"It has no network unless network is egress (then only the allow destinations).",
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
	s.addDiff(srv)
	s.addCode(srv)
}

func ptr[T any](v T) *T { return &v }

func (s *Server) create(ctx context.Context, _ *mcp.CallToolRequest, in createIn) (*mcp.CallToolResult, sandboxOut, error) {
	req, err := s.createRequest(in)
	if err != nil {
		return nil, sandboxOut{}, err
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

// createRequest is in's CreateSandboxRequest, labelled with this session.
func (s *Server) createRequest(in createIn) (*boxdv1.CreateSandboxRequest, error) {
	labels := map[string]string{}
	for k, v := range in.Labels {
		if k == SessionLabel || k == KeepLabel {
			return nil, fmt.Errorf("labels: %s is set by this MCP server (use keep to keep a sandbox)", k)
		}
		labels[k] = v
	}
	labels[SessionLabel] = s.session
	if in.Keep {
		labels[KeepLabel] = "true"
	}
	req := &boxdv1.CreateSandboxRequest{
		Image: in.Image, Env: in.Env, Workdir: in.Workdir, Labels: labels, Name: in.Name, Ttl: in.TTL,
		IdleTimeout: in.IdleTimeout, OnIdle: in.OnIdle, Pull: in.Pull, User: in.User, ReadOnlyRootfs: in.ReadOnly,
		Tmpfs: in.Tmpfs, Ulimits: in.Ulimits, Hostname: in.Hostname, CpuWeight: in.CPUWeight, MemoryLow: in.MemoryLow,
		ExecTimeout: in.ExecTimeout, OutputLimit: in.OutputLimit, Runtime: in.Runtime, Cold: in.Cold, Volumes: in.Volumes,
		AutoResume: in.AutoResume,
		Git:        in.Git, GitDepth: in.GitDepth,
	}
	if in.Memory != "" || in.CPUs != 0 || in.Pids != 0 || in.Disk != "" {
		req.Limits = &boxdv1.Limits{Memory: in.Memory, Cpus: in.CPUs, Pids: in.Pids, Disk: in.Disk}
	}
	if in.Network != "" || len(in.Allow) > 0 {
		mode := in.Network
		if mode == "" {
			mode = "egress" // an allowlist means egress, as in the SDKs
		}
		req.Network = &boxdv1.NetworkRequest{Mode: mode, Allow: in.Allow}
	}
	for _, p := range in.Publish {
		req.Publish = append(req.Publish, &boxdv1.PublishedPort{Port: p.Port, HostPort: p.HostPort, HostIp: p.HostIP, Protocol: p.Protocol})
	}
	return req, nil
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
