//go:build linux

package e2e

import (
	"context"
	"strings"
	"testing"

	"connectrpc.com/connect"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// TestMCPCreateSettings: one sandbox_create through boxctl mcp with the
// settings sdk/create-options.json lists for MCP (all but the egress
// network, which needs its own topology) is made with each of them, as
// inspect and commands inside show; a reserved label is refused and
// leaves nothing.
func TestMCPCreateSettings(t *testing.T) {
	cs := mcpSession(t)
	defer cs.Close()
	args := map[string]any{
		"memory": "256m", "cpus": 0.5, "pids": 200, "disk": "64m", "env": []any{"MODE=mcp"}, "workdir": "/tmp",
		"labels": map[string]any{"team": "e2e"}, "ttl": "10m", "user": "sandbox", "read_only": true,
		"tmpfs": []any{"/cache:4m"}, "ulimits": []any{"nofile=512"}, "hostname": "mcp-all", "cpu_weight": 300,
		"memory_low": "32m", "exec_timeout": "20s", "output_limit": 1000, "idle_timeout": "10m", "on_idle": "delete",
		"runtime": "runc", "cold": true, "pull": "never", "publish": []any{map[string]any{"port": 8000}},
	}
	text, sb := call(t, cs, "sandbox_create", args, false)
	id, _ := sb["id"].(string)
	if id == "" {
		t.Fatalf("create: %s %v", text, sb)
	}
	defer env.api.DeleteSandbox(context.Background(), connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: id}))
	got := inspect(t, id)
	if got.MemoryBytes != 256<<20 || got.Cpus != 0.5 || got.Pids != 200 || got.DiskBytes != 64<<20 || got.Workdir != "/tmp" {
		t.Errorf("limits and workdir: %+v", got)
	}
	if got.User != "sandbox" || got.Hostname != "mcp-all" || !got.GetSecurity().GetReadOnlyRootfs() || got.GetUlimits().GetNofile() != 512 ||
		len(got.Tmpfs) == 0 || got.CpuWeight != 300 || got.MemoryLowBytes != 32<<20 || got.ExecTimeout != "20s" || got.OutputLimit != 1000 {
		t.Errorf("settings: %+v", got)
	}
	if got.IdleTimeout != "10m0s" || got.OnIdle != "delete" || got.Runtime != "runc" || got.Labels["team"] != "e2e" ||
		len(got.Ports) != 1 || got.Ports[0].Port != 8000 || got.Ports[0].HostPort == 0 {
		t.Errorf("idle policy, runtime, labels, ports: %+v", got)
	}
	out, _ := call(t, cs, "exec", map[string]any{"sandbox_id": id, "command": "id -u; hostname; ulimit -n; echo $MODE; touch /x 2>/dev/null || echo ro"}, false)
	for _, want := range []string{"1000\nmcp-all\n512\nmcp\nro\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("exec inside: %q, want %q", out, want)
		}
	}

	n := countSandboxes(t)
	msg, _ := call(t, cs, "sandbox_create", map[string]any{"labels": map[string]any{"mcp-keep": "true"}}, true)
	if !strings.Contains(msg, "labels") {
		t.Errorf("reserved label: %q, want an error naming labels", msg)
	}
	if m, _ := call(t, cs, "sandbox_create", map[string]any{"disk": "12xb"}, true); !strings.Contains(m, "disk") {
		t.Errorf("bad disk: %q, want an error naming disk", m)
	}
	if after := countSandboxes(t); after != n {
		t.Errorf("refused creates left sandboxes: %d, then %d", n, after)
	}
}
