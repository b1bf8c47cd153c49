//go:build linux

package runtime

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"

	"github.com/boxd-dev/boxd/internal/events"
)

func TestMayUse(t *testing.T) {
	bg := context.Background()
	for _, tc := range []struct {
		name  string
		ctx   context.Context
		owner uint32
		want  bool
	}{
		{"boxd itself", bg, 1000, true},
		{"owner", WithCaller(bg, Caller{UID: 1000}), 1000, true},
		{"other user", WithCaller(bg, Caller{UID: 1001}), 1000, false},
		{"other user on root's", WithCaller(bg, Caller{UID: 1001}), 0, false},
		{"admin", WithCaller(bg, Caller{UID: 1001, Admin: true}), 1000, true},
	} {
		if got := mayUse(tc.ctx, tc.owner); got != tc.want {
			t.Errorf("%s: mayUse = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestOwnerOf(t *testing.T) {
	if ownerOf(map[string]string{LabelOwner: "1000"}) != 1000 || ownerOf(nil) != 0 || ownerOf(map[string]string{LabelOwner: "x"}) != 0 {
		t.Error("ownerOf")
	}
}

func TestQuotaReserve(t *testing.T) {
	inv := newInventory(0)
	q := Quotas{MaxSandboxes: 2, MaxMemory: 1 << 30}
	inv.showOwned("aaaaaaaaaaaa", owned{uid: 1000, memory: 512 << 20})
	inv.showOwned("bbbbbbbbbbbb", owned{uid: 1001, memory: 1 << 30})
	if err := inv.reserveQuota("t1", owned{uid: 1000, memory: 256 << 20}, q); err != nil {
		t.Fatal(err)
	}
	// The pending create counts: a third is over the count quota.
	err := inv.reserveQuota("t2", owned{uid: 1000, memory: 16 << 20}, q)
	if !errdefs.IsResourceExhausted(err) || !strings.Contains(err.Error(), "max-sandboxes-per-user") {
		t.Fatalf("third sandbox: %v", err)
	}
	inv.releaseQuota("t1")
	err = inv.reserveQuota("t3", owned{uid: 1000, memory: 768 << 20}, q)
	if !errdefs.IsResourceExhausted(err) || !strings.Contains(err.Error(), "max-memory-per-user") {
		t.Fatalf("memory over: %v", err)
	}
	if err := inv.reserveQuota("t4", owned{uid: 1000, memory: 512 << 20}, q); err != nil {
		t.Fatalf("exactly at the memory quota: %v", err)
	}
	inv.releaseQuota("t4")
	// A sandbox being deleted is no client's, but counts until its
	// teardown is done and it is forgotten.
	inv.hide("aaaaaaaaaaaa")
	if inv.isVisible("aaaaaaaaaaaa") {
		t.Fatal("a hidden sandbox is visible")
	}
	err = inv.reserveQuota("t5", owned{uid: 1000, memory: 768 << 20}, q)
	if !errdefs.IsResourceExhausted(err) {
		t.Fatalf("the memory of a sandbox being deleted was freed before its teardown: %v", err)
	}
	inv.forget("aaaaaaaaaaaa")
	if err := inv.reserveQuota("t6", owned{uid: 1000, memory: 768 << 20}, q); err != nil {
		t.Fatalf("after the teardown: %v", err)
	}
	// One found marked for deletion at start counts the same.
	inv.addLeaving("cccccccccccc", owned{uid: 1001, memory: 1 << 20})
	err = inv.reserveQuota("t7", owned{uid: 1001, memory: 1 << 20}, Quotas{MaxSandboxes: 2})
	if !errdefs.IsResourceExhausted(err) || !strings.Contains(err.Error(), "being deleted") {
		t.Fatalf("a third sandbox of uid 1001 with one being deleted: %v", err)
	}
	// Root is not limited.
	for i := 0; i < 5; i++ {
		if err := inv.reserveQuota("r"+string(rune('a'+i)), owned{uid: 0, memory: 4 << 30}, q); err != nil {
			t.Fatalf("root: %v", err)
		}
	}
}

// TestListOwnerFilter: the filter ls and stats share lists a caller's own
// sandboxes, an admin's own unless it asks for all or another owner's,
// and refuses those asks from anyone else.
func TestListOwnerFilter(t *testing.T) {
	bg := context.Background()
	user, admin := WithCaller(bg, Caller{UID: 1000}), WithCaller(bg, Caller{UID: 1001, Admin: true})
	other := uint32(1002)
	own := func(uid string) string { return `labels."boxd.io/managed"==true,labels."boxd.io/owner"=="` + uid + `"` }
	for _, tc := range []struct {
		name string
		ctx  context.Context
		f    ListFilter
		want string // "": refused
	}{
		{"user", user, ListFilter{}, own("1000")},
		{"user all", user, ListFilter{All: true}, ""},
		{"user other owner", user, ListFilter{Owner: &other}, ""},
		{"admin", admin, ListFilter{}, own("1001")},
		{"admin all", admin, ListFilter{All: true}, `labels."boxd.io/managed"==true`},
		{"admin other owner", admin, ListFilter{Owner: &other}, own("1002")},
		{"boxd itself", bg, ListFilter{}, `labels."boxd.io/managed"==true`},
	} {
		got, err := listOwnerFilter(tc.ctx, tc.f)
		if tc.want == "" {
			if !errdefs.IsPermissionDenied(err) {
				t.Errorf("%s: %q %v, want permission_denied", tc.name, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %q %v, want %q", tc.name, got, err, tc.want)
		}
	}
}

// TestEmitOwnerAndArgv: an event is its sandbox's owner's (a sandbox being
// deleted too; one boxd does not know is root's), and exec_started
// carries the arguments only with EventsArgv.
func TestEmitOwnerAndArgv(t *testing.T) {
	for _, argv := range []bool{false, true} {
		log, err := events.Open(events.Config{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		defer log.Close()
		m := &Manager{cfg: Config{Events: log, EventsArgv: argv}, inv: newInventory(0)}
		m.inv.showOwned("a", owned{uid: 1000})
		m.inv.showOwned("b", owned{uid: 1001})
		m.inv.hide("b")
		m.execStarted("a", []string{"sh", "-c", "export TOKEN=x"})
		m.emit(events.Paused, "b", nil)
		m.emit(events.Died, "unknown", nil)
		evs, _ := log.Subscribe(time.Now().Add(-time.Minute), events.Filter{}, false)
		if len(evs) != 3 || evs[0].Owner != 1000 || evs[1].Owner != 1001 || evs[2].Owner != 0 {
			t.Fatalf("argv %v: owners of %+v, want 1000, 1001, 0", argv, evs)
		}
		if got, want := evs[0].Attrs["args"], map[bool]string{true: "sh -c export TOKEN=x"}[argv]; got != want || (!argv && len(evs[0].Attrs) != 0) {
			t.Errorf("argv %v: exec_started attrs %v, want args %q", argv, evs[0].Attrs, want)
		}
	}
}

// TestDiskQuota: max-disk-per-user counts disk caps and the fork layers
// under a uid's sandboxes, each layer once, for as long as a sandbox on it
// is there (a deleted fork's source does not release them).
func TestDiskQuota(t *testing.T) {
	inv := newInventory(0)
	q := Quotas{MaxDisk: 300 << 20}
	f1 := LayerCharge{Key: "boxd-fork-1", Bytes: 60 << 20}
	f2 := LayerCharge{Key: "boxd-fork-2", Bytes: 60 << 20}
	// A source with a 64m cap, then its fork: the fork's new layer is
	// reserved, then the fork on it counts it.
	inv.showOwned("aaaaaaaaaaaa", owned{uid: 1000, disk: 64 << 20})
	if err := inv.reserveQuota("l1", owned{uid: 1000, layers: []LayerCharge{f1}, layerOnly: true}, q); err != nil {
		t.Fatal(err)
	}
	inv.showOwned("bbbbbbbbbbbb", owned{uid: 1000, disk: 64 << 20, layers: []LayerCharge{f1}})
	inv.releaseQuota("l1")
	// The source goes; its fork keeps the layer, which still counts.
	inv.forget("aaaaaaaaaaaa")
	// Two forks sharing a layer count it once: 64m + 60m + 64m fits.
	if err := inv.reserveQuota("c", owned{uid: 1000, disk: 64 << 20, layers: []LayerCharge{f1}}, q); err != nil {
		t.Fatalf("a second fork on the same layer: %v", err)
	}
	inv.releaseQuota("c")
	// A fork of the fork: its layer and the one under it. 64m + 60m + 60m
	// (layer) and the new fork's 64m is 248m; another fork layer past the
	// quota is refused, naming it.
	if err := inv.reserveQuota("l2", owned{uid: 1000, layers: []LayerCharge{f1, f2}, layerOnly: true}, q); err != nil {
		t.Fatal(err)
	}
	inv.showOwned("cccccccccccc", owned{uid: 1000, disk: 64 << 20, layers: []LayerCharge{f1, f2}})
	inv.releaseQuota("l2")
	inv.forget("bbbbbbbbbbbb")
	err := inv.reserveQuota("l3", owned{uid: 1000, layers: []LayerCharge{f1, f2, {Key: "boxd-fork-3", Bytes: 200 << 20}}, layerOnly: true}, q)
	if !errdefs.IsResourceExhausted(err) || !strings.Contains(err.Error(), "max-disk-per-user") || !strings.Contains(err.Error(), "fork layer") {
		t.Fatalf("a fork layer past the disk quota: %v", err)
	}
	// A layer-only reservation is no sandbox for the count quota.
	if err := inv.reserveQuota("l4", owned{uid: 1000, layers: []LayerCharge{f2}, layerOnly: true}, Quotas{MaxSandboxes: 1, MaxDisk: q.MaxDisk}); err != nil {
		t.Fatalf("a layer already counted, at the count quota: %v", err)
	}
	inv.releaseQuota("l4")
	// A sandbox without a cap cannot be counted: refused under the quota.
	err = inv.reserveQuota("u", owned{uid: 1001, memory: 1 << 20}, q)
	if !errdefs.IsResourceExhausted(err) || !strings.Contains(err.Error(), "no disk cap") {
		t.Fatalf("an uncapped sandbox under max-disk-per-user: %v", err)
	}
	// Once the last sandbox on the layers goes, they count no more.
	inv.forget("cccccccccccc")
	if err := inv.reserveQuota("d", owned{uid: 1000, disk: 300 << 20}, q); err != nil {
		t.Fatalf("after the last fork: %v", err)
	}
	// Root is not limited.
	if err := inv.reserveQuota("r", owned{uid: 0}, q); err != nil {
		t.Fatalf("root: %v", err)
	}
}
