//go:build linux

// Room: checkpoint. Fork with processes: what the pinned runsc allows.

package runtime

import (
	"context"
	"fmt"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/errdefs"
)

// errForkUIDBlock is why a gVisor sandbox is not forked with its
// processes. runsc restores a checkpoint only into a spec whose UID and
// GID mappings equal the checkpointed one's (its restore spec validation:
// "UIDMappings does not match across checkpoint restore"), and every boxd
// sandbox has a host uid block of its own: a fork restored from the
// source's checkpoint would have to share the source's block, which would
// let a process that left one sandbox own the other's files. Measured
// with the pinned runsc; see docs/checkpoint.md, "Fork with processes".
var errForkUIDBlock = fmt.Errorf("with_processes: the pinned runsc restores a checkpoint only into a sandbox with the same host uid block as the one checkpointed, and every sandbox has a uid block of its own: fork with processes is not offered (fork without it copies the files): %w", errdefs.ErrFailedPrecondition)

// forkWithProcesses answers a fork that asks to carry the source's
// processes: the source is found as for any call (another user's is
// not_found), then refused with what stands in the way: CRIU for runc,
// the uid block for gVisor. Nothing is checkpointed or made.
func (m *Manager) forkWithProcesses(ctx context.Context, req ForkRequest) ([]*Sandbox, error) {
	ctr, err := m.find(ctx, req.Source)
	if err != nil {
		return nil, err
	}
	if _, _, err := m.ckTarget(ctx, ctr); err != nil {
		return nil, fmt.Errorf("with_processes: %w", err)
	}
	sb, err := m.describe(ctx, ctr, false)
	if err != nil {
		return nil, err
	}
	if sb.State != string(client.Running) {
		return nil, fmt.Errorf("sandbox %s is %s: fork with processes needs a running sandbox: %w", ctr.ID(), sb.State, errdefs.ErrFailedPrecondition)
	}
	return nil, errForkUIDBlock
}
