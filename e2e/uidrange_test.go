//go:build linux

package e2e

import (
	"strconv"
	"strings"
	"testing"

	"connectrpc.com/connect"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// validUIDMap reports whether m ("0:HOST:SIZE") maps root to the first id
// of one of boxd's default blocks.
func validUIDMap(m string) bool {
	f := strings.Split(m, ":")
	if len(f) != 3 || f[0] != "0" || f[2] != "65536" {
		return false
	}
	host, err := strconv.ParseUint(f[1], 10, 32)
	return err == nil && host >= 200000 && (host-200000)%65536 == 0
}

// TestDistinctUIDRanges: root in one sandbox is a different host user from
// root in another, a block is reused only after its sandbox is deleted,
// and a restarted boxd knows which blocks are taken.
func TestDistinctUIDRanges(t *testing.T) {
	d := startBoxd(t, namespace+"-uid", true, "--userns-ranges", "2")
	create := func() (string, string, int) { return d.boxctl("create") }
	a, errA, code := create()
	if code != 0 {
		t.Fatalf("create a: %s", errA)
	}
	b, errB, code := create()
	if code != 0 {
		t.Fatalf("create b: %s", errB)
	}
	a, b = strings.TrimSpace(a), strings.TrimSpace(b)
	uidOf := func(id string) string {
		resp, err := d.api.GetSandbox(d.c, connect.NewRequest(&boxdv1.GetSandboxRequest{Id: id}))
		if err != nil {
			t.Fatalf("inspect %s: %v", id, err)
		}
		return resp.Msg.Sandbox.Security.UidMap
	}
	ua, ub := uidOf(a), uidOf(b)
	if ua == ub || !validUIDMap(ua) || !validUIDMap(ub) {
		t.Fatalf("uid maps %q and %q: want two distinct blocks", ua, ub)
	}
	// The kernel agrees.
	for id, want := range map[string]string{a: ua, b: ub} {
		out, _, code := d.boxctl("exec", id, "--", "sh", "-c", "cat /proc/self/uid_map")
		if f := strings.Fields(out); code != 0 || len(f) != 3 || "0:"+f[1]+":"+f[2] != want {
			t.Errorf("%s: kernel uid_map %q, want %s", id, out, want)
		}
	}
	// Both blocks taken: a third create is refused, naming the flag.
	if _, stderr, code := create(); code == 0 || !strings.Contains(stderr, "resource_exhausted") || !strings.Contains(stderr, "userns-ranges") {
		t.Errorf("third create with 2 blocks: exit %d %q", code, stderr)
	}
	// A restarted boxd reads the blocks back from the labels.
	d.kill()
	d.start(t)
	if _, stderr, code := create(); code == 0 || !strings.Contains(stderr, "userns-ranges") {
		t.Errorf("third create after a restart: exit %d %q", code, stderr)
	}
	// Delete a: its block comes back, and only then.
	if _, stderr, code := d.boxctl("rm", "-f", a); code != 0 {
		t.Fatal(stderr)
	}
	c, stderr, code := create()
	if code != 0 {
		t.Fatalf("create after rm: %s", stderr)
	}
	c = strings.TrimSpace(c)
	if uc := uidOf(c); uc != ua {
		t.Errorf("new sandbox got %s, want the freed block %s", uc, ua)
	}
	for _, id := range []string{b, c} {
		if _, stderr, code := d.boxctl("rm", "-f", id); code != 0 {
			t.Errorf("rm %s: %s", id, stderr)
		}
	}
}
