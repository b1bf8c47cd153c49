//go:build linux

package runtime

import (
	"context"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
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
