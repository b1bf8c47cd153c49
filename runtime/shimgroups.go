// Room: resources. Shared runc shims: which group a sandbox joins.

package runtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
)

// ShimGroupAnnotation makes containerd's runc shim serve every container
// whose spec carries the same value from one shim process (the shim's
// manager reads it at start: a second container of the group connects to
// the running shim instead of starting its own).
const ShimGroupAnnotation = "io.containerd.runc.v2.group"

// shimGroups puts up to size sandboxes on one runc shim. A shim is most of
// an idle sandbox's host memory (about 4.5 MiB of 6); shared by eight, it
// is a fraction of one.
//
// A group's shim exits once its last container is deleted, and a create
// that joined the group in that moment would connect to a shim on its way
// out (the socket answers until the process is gone). So a group is
// retired for good when its last member is given back, and never handed
// out again: the next create starts a new group with a fresh random name.
// A member counts from take (before its container exists) to give (after
// its task and container are deleted), so a group cannot empty while one
// of its creates is under way.
//
// What is taken is written only in each sandbox's record label, as the
// uid blocks are (idRanges): the first take after a start reads them back.
type shimGroups struct {
	size int

	mu      sync.Mutex
	loaded  bool
	members map[string]int // group -> sandboxes (and creates) in it
}

func newShimGroups(size int) *shimGroups {
	return &shimGroups{size: size, members: map[string]int{}}
}

// enabled says whether sandboxes share shims at all (size 1: each its own).
func (g *shimGroups) enabled() bool { return g.size > 1 }

func (g *shimGroups) load(ctx context.Context, m *Manager) error {
	if g.loaded {
		return nil
	}
	recs, err := m.records(ctx)
	if err != nil {
		return fmt.Errorf("shim groups: %w", err)
	}
	for _, rec := range recs {
		if rec.ShimGroup != "" {
			g.members[rec.ShimGroup]++
		}
	}
	g.loaded = true
	return nil
}

// take returns the group a new sandbox joins: the fullest group that has
// room, so shims fill up and few stay half-empty, or a new one.
func (g *shimGroups) take(ctx context.Context, m *Manager) (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.load(ctx, m); err != nil {
		return "", err
	}
	best, bestN := "", 0
	for name, n := range g.members {
		if n < g.size && n > bestN {
			best, bestN = name, n
		}
	}
	if best == "" {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", fmt.Errorf("shim groups: %w", err)
		}
		best = "boxd-" + hex.EncodeToString(b[:])
	}
	g.members[best]++
	return best, nil
}

// give hands a member's place back once its task and container are gone.
// A group that empties is forgotten, so it is never joined again.
func (g *shimGroups) give(name string) {
	if name == "" {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.members[name] <= 1 {
		delete(g.members, name)
		return
	}
	g.members[name]--
}

// sizes is how many members each live group has, for tests and logs.
func (g *shimGroups) sizes() map[string]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[string]int, len(g.members))
	for k, v := range g.members {
		out[k] = v
	}
	return out
}
