//go:build linux

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/containerd/v2/core/snapshots"
)

// forkLayers lists the fork layers (committed snapshots boxd keeps on the
// host's filesystem, outside any disk cap) of d's namespace with the disk
// each holds.
func forkLayers(t *testing.T, c context.Context) map[string]int64 {
	t.Helper()
	sn := env.ctr.SnapshotService("overlayfs")
	out := map[string]int64{}
	err := sn.Walk(c, func(ctx context.Context, i snapshots.Info) error {
		if i.Labels["boxd.io/fork-layer"] == "" {
			return nil
		}
		u, err := sn.Usage(ctx, i.Name)
		if err != nil {
			return err
		}
		out[i.Name] = u.Size
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sum(m map[string]int64) (n int64) {
	for _, v := range m {
		n += v
	}
	return n
}

// TestForkChainDiskQuota: a user whose sandboxes all have a 64m disk cap
// forks, deletes the source, writes 40 MB in the fork and forks again.
// Each fork copies the source's writable layer into a fork layer on the
// host's filesystem, which the next fork sits on, so the source's delete
// releases nothing: without a per-user budget the user holds one sandbox
// and the host's disk grows by 40 MB a round, without bound. With
// --max-disk-per-user 320m the fork layers count against the user (caps
// plus layers): a fork that would pass the budget fails with
// resource_exhausted naming max-disk-per-user and leaves no layer, the
// layers on the host stay under the budget, a restarted boxd counts them
// again, and once the user's last sandbox is deleted no fork layer is
// left.
func TestForkChainDiskQuota(t *testing.T) {
	sockGroup, adminGroup, ua, _, _ := hostUsers(t)
	const budget = 320 << 20
	d := startBoxd(t, namespace+"-forkdisk", true, "--socket-group", sockGroup, "--admin-group", adminGroup,
		"--default-disk", "64m", "--max-disk-per-user", "320m")
	if err := os.Chmod(filepath.Dir(d.dir), 0o711); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(d.dir, "boxctl")
	for _, name := range []string{"boxctl", "boxctl-full"} {
		if b, err := os.ReadFile(filepath.Join(filepath.Dir(env.boxctl), name)); err != nil || os.WriteFile(filepath.Join(d.dir, name), b, 0o755) != nil {
			t.Fatalf("copy %s: %v", name, err)
		}
	}
	as := func(args ...string) (string, string, int) {
		out, stderr, code, _ := boxctlAs(t, bin, ua, d.sock, args...)
		return out, stderr, code
	}
	out, stderr, code := as("create")
	if code != 0 {
		t.Fatalf("create: exit %d: %s", code, stderr)
	}
	cur := strings.TrimSpace(out)
	refused := ""
	for round := 0; round < 10 && refused == ""; round++ {
		if _, stderr, code := as("exec", cur, "--", "sh", "-c", fmt.Sprintf("dd if=/dev/urandom of=/root/r%d bs=1M count=40 2>&1 && sync", round)); code != 0 {
			t.Fatalf("round %d: write 40 MB: exit %d: %s", round, code, stderr)
		}
		before := forkLayers(t, d.c)
		out, stderr, code := as("fork", cur)
		if code != 0 {
			refused = stderr
			if after := forkLayers(t, d.c); len(after) != len(before) {
				t.Errorf("round %d: the refused fork left a layer: %v, before %v", round, after, before)
			}
			break
		}
		next := strings.TrimSpace(out)
		if _, stderr, code := as("rm", cur); code != 0 {
			t.Fatalf("round %d: rm the source: exit %d: %s", round, code, stderr)
		}
		cur = next
		layers := forkLayers(t, d.c)
		t.Logf("round %d: %d fork layers hold %d MiB on the host", round, len(layers), sum(layers)>>20)
		if sum(layers) > budget {
			t.Errorf("round %d: the user's fork layers hold %d bytes on the host, above the 320m budget", round, sum(layers))
		}
	}
	if refused == "" {
		t.Fatalf("10 rounds of fork, rm and write: no fork refused; fork layers now hold %d MiB", sum(forkLayers(t, d.c))>>20)
	}
	t.Logf("refused: %s", strings.TrimSpace(refused))
	if !strings.Contains(refused, "resource_exhausted") || !strings.Contains(refused, "max-disk-per-user") {
		t.Errorf("the fork past the budget: %s; want resource_exhausted naming max-disk-per-user", refused)
	}
	// A restarted boxd reads the layers back from the snapshots: a 128m
	// create fits beside the last fork's 64m cap alone, not beside its
	// 160 MiB of layers too.
	d.kill()
	d.start(t)
	if _, stderr, code := as("create", "--disk", "128m"); code == 0 || !strings.Contains(stderr, "max-disk-per-user") {
		t.Errorf("after a restart of boxd, a create past the budget with the layers: exit %d, %s; want resource_exhausted naming max-disk-per-user", code, stderr)
	}
	// The user's files are all there in the last fork.
	if _, stderr, code := as("exec", cur, "--", "sh", "-c", "test -s /root/r0 && test -s /root/r1"); code != 0 {
		t.Errorf("the last fork lost the earlier rounds' files: %s", stderr)
	}
	if _, stderr, code := as("rm", cur); code != 0 {
		t.Fatalf("rm the last fork: %s", stderr)
	}
	if left := forkLayers(t, d.c); len(left) != 0 {
		t.Errorf("after the user's last sandbox was deleted, fork layers are left: %v", left)
	}
}
