//go:build linux

package runtime

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/cgroups/v3/cgroup1"
	"github.com/containerd/errdefs"
)

func readTrim(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// A temp dir stands in for /sys/fs/cgroup: the files boxd writes are the
// ones the kernel reads.
func TestTotalsV2(t *testing.T) {
	mnt := t.TempDir()
	if err := os.WriteFile(filepath.Join(mnt, "cgroup.subtree_control"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tot, err := setTotalsV2(mnt, "/boxd", 3<<30, 5000)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(mnt, "boxd")
	if got := readTrim(t, filepath.Join(dir, "memory.max")); got != "3221225472" {
		t.Errorf("memory.max = %q", got)
	}
	if got := readTrim(t, filepath.Join(dir, "pids.max")); got != "5000" {
		t.Errorf("pids.max = %q", got)
	}
	// The controllers must be on in the parent's parent, or the files
	// would not exist on a real host.
	if got := readTrim(t, filepath.Join(mnt, "cgroup.subtree_control")); !strings.Contains(got, "+memory") || !strings.Contains(got, "+pids") {
		t.Errorf("root subtree_control = %q, want memory and pids enabled", got)
	}
	if tot.pidsDir != dir {
		t.Errorf("pidsDir = %s", tot.pidsDir)
	}

	// 0 lifts the limits again.
	if _, err := setTotalsV2(mnt, "/boxd", 0, 0); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"memory.max", "pids.max"} {
		if got := readTrim(t, filepath.Join(dir, f)); got != "max" {
			t.Errorf("%s after 0 = %q, want max", f, got)
		}
	}

	// The pids check reads pids.current.
	tot, _ = setTotalsV2(mnt, "/boxd", 0, 100)
	os.WriteFile(filepath.Join(dir, "pids.current"), []byte("90\n"), 0o644)
	if err := tot.pidsExhausted(); !errdefs.IsResourceExhausted(err) || !strings.Contains(err.Error(), "max-pids-total of 100") {
		t.Errorf("90 of 100 pids used: %v, want resource_exhausted naming max-pids-total", err)
	}
	os.WriteFile(filepath.Join(dir, "pids.current"), []byte("84\n"), 0o644)
	if err := tot.pidsExhausted(); err != nil {
		t.Errorf("84 of 100 pids used: %v, want room for one more sandbox", err)
	}
}

func TestTotalsV1(t *testing.T) {
	root := t.TempDir()
	h := func() ([]cgroup1.Subsystem, error) {
		return []cgroup1.Subsystem{cgroup1.NewMemory(root), cgroup1.NewPids(root)}, nil
	}
	tot, err := setTotalsV1(h, "/boxd", 1<<30, 700)
	if err != nil {
		t.Fatal(err)
	}
	if got := readTrim(t, filepath.Join(root, "memory", "boxd", "memory.limit_in_bytes")); got != "1073741824" {
		t.Errorf("memory.limit_in_bytes = %q", got)
	}
	if got := readTrim(t, filepath.Join(root, "pids", "boxd", "pids.max")); got != "700" {
		t.Errorf("pids.max = %q", got)
	}
	if tot.pidsDir != filepath.Join(root, "pids", "boxd") {
		t.Errorf("pidsDir = %s", tot.pidsDir)
	}
	if _, err := setTotalsV1(h, "/boxd", 0, 0); err != nil {
		t.Fatal(err)
	}
	if got := readTrim(t, filepath.Join(root, "memory", "boxd", "memory.limit_in_bytes")); got != "-1" {
		t.Errorf("memory.limit_in_bytes after 0 = %q, want -1", got)
	}
	if got := readTrim(t, filepath.Join(root, "pids", "boxd", "pids.max")); got != "max" {
		t.Errorf("pids.max after 0 = %q, want max", got)
	}
}

// Creates racing for the last slots must not overshoot max-sandboxes.
func TestInventoryReserveRace(t *testing.T) {
	inv := newInventory(10)
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, refused := 0, 0
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := inv.reserve(strings.Repeat("x", 11) + string(rune('a'+i%26)) + string(rune('A'+i/26)))
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				ok++
			} else if errdefs.IsResourceExhausted(err) && strings.Contains(err.Error(), "max-sandboxes") {
				refused++
			} else {
				t.Errorf("reserve: %v", err)
			}
		}()
	}
	wg.Wait()
	if ok != 10 || refused != 90 || inv.count() != 10 {
		t.Errorf("%d reserved, %d refused, %d counted; want 10, 90, 10", ok, refused, inv.count())
	}
	// A pool member is counted but not visible until shown.
	inv = newInventory(0)
	inv.reserve("aaaaaaaaaaaa")
	if inv.isVisible("aaaaaaaaaaaa") {
		t.Error("a reserved (pool member) id is visible")
	}
	inv.show("aaaaaaaaaaaa")
	inv.hide("aaaaaaaaaaaa")
	if inv.isVisible("aaaaaaaaaaaa") || inv.count() != 1 {
		t.Error("hide must make an id invisible and keep it counted")
	}
}

// prune forgets only ids that were counted before the listing, are absent
// from it, and are not being created or deleted.
func TestInventoryPrune(t *testing.T) {
	inv := newInventory(0)
	inv.show("aaaaaaaaaaaa") // listed
	inv.show("bbbbbbbbbbbb") // removed behind boxd's back
	inv.reserve("cccccccccccc")
	listedAt := time.Now()
	time.Sleep(time.Millisecond)
	inv.reserve("dddddddddddd") // counted after the listing started
	busy := func(id string) bool { return id == "cccccccccccc" }
	gone := inv.prune(map[string]bool{"aaaaaaaaaaaa": true}, listedAt, busy)
	if len(gone) != 1 || gone[0] != "bbbbbbbbbbbb" {
		t.Errorf("pruned %v, want only bbbbbbbbbbbb", gone)
	}
	if inv.count() != 3 || inv.isVisible("bbbbbbbbbbbb") || !inv.isVisible("aaaaaaaaaaaa") {
		t.Errorf("after prune: %d counted, b visible %v", inv.count(), inv.isVisible("bbbbbbbbbbbb"))
	}
}
