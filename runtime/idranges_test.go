package runtime

import (
	"context"
	"errors"
	"testing"

	"github.com/containerd/errdefs"
)

func TestIDRangesRoundRobinAndReuse(t *testing.T) {
	r := newIDRanges(200000, 65536, 3)
	r.loaded = true // nothing exists yet
	ctx := context.Background()
	var got []uint32
	for range 3 {
		v, err := r.take(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
	}
	if got[0] != 200000 || got[1] != 265536 || got[2] != 331072 {
		t.Fatalf("blocks %v", got)
	}
	if _, err := r.take(ctx, nil); !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Fatalf("fourth take: %v, want resource exhausted", err)
	}
	r.give(got[1])
	if v, err := r.take(ctx, nil); err != nil || v != got[1] {
		t.Fatalf("after give: %d %v, want %d", v, err, got[1])
	}
	// Round robin: the next free block after the last taken is preferred
	// over a block given back earlier.
	r.give(got[0])
	r.give(got[2])
	if v, _ := r.take(ctx, nil); v != got[2] {
		t.Errorf("took %d, want %d (the block after the last taken)", v, got[2])
	}
}

// A block recorded by a boxd with another base or size blocks every
// block it overlaps.
func TestIDRangesForeignBlocks(t *testing.T) {
	r := newIDRanges(200000, 65536, 3)
	r.loaded = true
	r.used[200000+65536+100] = 2 // two old sandboxes on one odd block
	ctx := context.Background()
	a, _ := r.take(ctx, nil)
	b, err := r.take(ctx, nil)
	if a != 200000 || err == nil && b != 331072 {
		t.Fatalf("took %d and %d (%v): the odd block overlaps the second and third", a, b, err)
	}
	if _, err := r.take(ctx, nil); err == nil {
		t.Error("a take succeeded with every block overlapped or taken")
	}
	r.give(200000 + 65536 + 100)
	if _, err := r.take(ctx, nil); err == nil {
		t.Error("one give freed a block two sandboxes hold")
	}
}

// Gives before the first take are ignored: the first take reads what
// exists.
func TestIDRangesGiveBeforeLoad(t *testing.T) {
	r := newIDRanges(200000, 65536, 1)
	r.give(200000)
	if len(r.used) != 0 {
		t.Errorf("used = %v", r.used)
	}
}
