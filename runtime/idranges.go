// Room: resources. The uid blocks, one per sandbox.

package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/containerd/errdefs"
)

// idRanges hands each sandbox its own block of host uids and gids (root in
// the sandbox is the block's first id), so root in one sandbox is a
// different host user from root in another: a process that escaped one
// sandbox owns none of another's files and cannot signal its processes.
//
// A block is taken at create and given back only after the sandbox's
// container and writable layer are deleted (destroy), so no id is reused
// while a file it owns still exists. What is taken is not written
// anywhere of its own: each sandbox's record label holds its block, and
// the first allocation after a start reads them all back, so a boxd killed
// at any point forgets nothing that still exists and keeps nothing that
// does not.
type idRanges struct {
	base, size uint32
	count      int

	mu     sync.Mutex
	loaded bool
	used   map[uint32]int // first host id -> sandboxes holding it
	next   int            // where the search for a free block starts
}

func newIDRanges(base, size uint32, count int) *idRanges {
	return &idRanges{base: base, size: size, count: count, used: map[uint32]int{}}
}

// load marks the block of every sandbox and pool member that exists. It
// runs once, before the first allocation.
func (r *idRanges) load(ctx context.Context, m *Manager) error {
	if r.loaded {
		return nil
	}
	recs, err := m.records(ctx)
	if err != nil {
		return fmt.Errorf("uid ranges: %w", err)
	}
	for _, rec := range recs {
		if rec.HostUID != 0 {
			r.used[rec.HostUID]++
		}
	}
	// Each volume's files are owned by a block of its own.
	for _, b := range m.vols.blocks() {
		r.used[b]++
	}
	r.loaded = true
	return nil
}

// records are the record labels of every sandbox and pool member that
// exists, for what is handed out per sandbox and kept only there.
func (m *Manager) records(ctx context.Context) ([]record, error) {
	ctrs, err := m.cfg.Client.Containers(ctx, fmt.Sprintf(`labels."%s"`, LabelSandbox))
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	recs := make([]record, 0, len(ctrs))
	for _, c := range ctrs {
		labels, err := c.Labels(ctx)
		if err != nil {
			continue // deleted meanwhile
		}
		var rec record
		if json.Unmarshal([]byte(labels[LabelSandbox]), &rec) == nil {
			recs = append(recs, rec)
		}
	}
	return recs, nil
}

// take returns the first host id of a free block.
func (r *idRanges) take(ctx context.Context, m *Manager) (uint32, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.load(ctx, m); err != nil {
		return 0, err
	}
	for i := 0; i < r.count; i++ {
		k := (r.next + i) % r.count
		start := r.base + uint32(k)*r.size
		if r.overlaps(start) {
			continue
		}
		r.used[start]++
		// Round robin: a block just given back is the last to be reused.
		r.next = (k + 1) % r.count
		return start, nil
	}
	return 0, fmt.Errorf("all %d uid ranges (--userns-ranges) are in use: %w", r.count, errdefs.ErrResourceExhausted)
}

// overlaps reports whether any block in use shares an id with the block at
// start. Blocks recorded by a boxd with other settings may sit anywhere.
func (r *idRanges) overlaps(start uint32) bool {
	end := uint64(start) + uint64(r.size)
	for u := range r.used {
		if uint64(u) < end && uint64(start) < uint64(u)+uint64(r.size) {
			return true
		}
	}
	return false
}

// give returns a block once its sandbox and files are gone.
func (r *idRanges) give(start uint32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.loaded {
		return // the first take reads what exists, without this sandbox
	}
	if r.used[start] <= 1 {
		delete(r.used, start)
		return
	}
	r.used[start]--
}
