//go:build linux

package e2e

import (
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// TestDiskDefaultCap: a boxd started without --default-disk caps every
// sandbox whose create names no disk at 10 GiB, and its warm pool still
// serves such a create (members are started with the cap).
func TestDiskDefaultCap(t *testing.T) {
	d := startBoxd(t, namespace+"-diskdef", true, "--warm-pool", "1")
	members := waitPool(t, d.c, 1, d.dir)
	resp, err := d.api.CreateSandbox(d.c, connect.NewRequest(&boxdv1.CreateSandboxRequest{Ttl: "5m"}))
	if err != nil {
		t.Fatal(err)
	}
	sb := resp.Msg.Sandbox
	if !slices.Contains(members, sb.Id) {
		t.Errorf("a create without --disk got %s, not the pool's member %v", sb.Id, members)
	}
	out, stderr, code := d.boxctl("inspect", sb.Id)
	if code != 0 {
		t.Fatalf("inspect: exit %d %s", code, stderr)
	}
	if !strings.Contains(out, `"disk_bytes": "10737418240"`) {
		t.Errorf("inspect of a create without --disk shows no 10g cap:\n%s", out)
	}
	// What the sandbox itself sees: its writable layer is the capped
	// filesystem, about 10 GiB.
	df, stderr, code := d.boxctl("exec", sb.Id, "--", "df", "-k", "/workspace")
	if code != 0 {
		t.Fatalf("df: exit %d %s", code, stderr)
	}
	if f := strings.Fields(df); len(f) < 9 || !strings.HasPrefix(f[8], "10") || len(f[8]) != 8 {
		t.Errorf("df /workspace in a sandbox under the default cap: %q, want about 10 GiB (10xxxxxx KiB)", df)
	}
}

// TestDiskDefaultEnforced: --default-disk applies to a create that names
// no disk: writing past it fails with the disk-full error; and
// --default-disk 0 leaves such a create uncapped.
func TestDiskDefaultEnforced(t *testing.T) {
	capped := startBoxd(t, namespace+"-diskdef64", true, "--default-disk", "64m")
	id, stderr, code := capped.boxctl("create", "--ttl", "5m")
	if code != 0 {
		t.Fatalf("create: exit %d %s", code, stderr)
	}
	id = strings.TrimSpace(id)
	sb, err := capped.api.GetSandbox(capped.c, connect.NewRequest(&boxdv1.GetSandboxRequest{Id: id}))
	if err != nil {
		t.Fatal(err)
	}
	if got := sb.Msg.Sandbox.DiskBytes; got != 64<<20 {
		t.Errorf("inspect disk_bytes = %d under --default-disk 64m, want %d", got, 64<<20)
	}
	out, stderr, code := capped.boxctl("exec", "--timeout", "60s", id, "--", "sh", "-c", "dd if=/dev/zero of=/workspace/bomb bs=1M count=100 2>&1")
	if code == 0 || !strings.Contains(out+stderr, "No space left on device") {
		t.Errorf("100 MiB under --default-disk 64m: exit %d, %q %q; want ENOSPC", code, out, stderr)
	}

	open := startBoxd(t, namespace+"-diskdef0", true, "--default-disk", "0")
	id, stderr, code = open.boxctl("create", "--ttl", "5m")
	if code != 0 {
		t.Fatalf("create: exit %d %s", code, stderr)
	}
	sb, err = open.api.GetSandbox(open.c, connect.NewRequest(&boxdv1.GetSandboxRequest{Id: strings.TrimSpace(id)}))
	if err != nil {
		t.Fatal(err)
	}
	if got := sb.Msg.Sandbox.DiskBytes; got != 0 {
		t.Errorf("inspect disk_bytes = %d under --default-disk 0, want 0 (no cap)", got)
	}
	// Only there may a create ask for no cap.
	if _, stderr, code := open.boxctl("create", "--disk", "0", "--ttl", "5m"); code != 0 {
		t.Errorf("create --disk 0 under --default-disk 0: exit %d %s", code, stderr)
	}
}
