// Room: reconcile. State directories and writable snapshots that a killed
// boxd or containerd left without their sandbox.

package runtime

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/errdefs"
	"github.com/moby/sys/mountinfo"
)

// removeOrphanStateDirs removes the state directories of sandboxes that
// have no container: a create that a killed boxd was in the middle of
// made the directory first and nothing else would remove it. It runs at
// start, before any create, so no directory belongs to a create in
// progress. A directory with anything mounted beneath it is left alone
// (and logged): removing through a mount could reach what it mounts.
func (m *Manager) removeOrphanStateDirs(ctrs []containers.Container) {
	root := filepath.Join(m.cfg.StateDir, "sandboxes")
	ents, err := os.ReadDir(root)
	if err != nil {
		return
	}
	present := make(map[string]bool, len(ctrs))
	for _, c := range ctrs {
		present[c.ID] = true
	}
	for _, e := range ents {
		if present[e.Name()] || !e.IsDir() {
			continue
		}
		dir := filepath.Join(root, e.Name())
		mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
		if err != nil || len(mounts) > 0 {
			m.log.Warn("state directory without its sandbox has mounts; left in place", "dir", dir, "mounts", len(mounts), "err", err)
			continue
		}
		m.log.Info("removing a state directory without its sandbox", "dir", dir)
		if err := os.RemoveAll(dir); err != nil {
			m.log.Warn("remove state directory", "dir", dir, "err", err)
		}
	}
}

// orphanSnapshotAge is how old a sandbox's writable snapshot without a
// container must be before the reconcile pass removes it; a create holds
// its claim from before the snapshot exists until the container does.
const orphanSnapshotAge = 15 * time.Second

// sweepOrphanSnapshots removes sandboxes' writable snapshots (named by
// their 12-hex id) that no container references: a create whose
// container could not be made, and whose rollback failed too (containerd
// died in between), leaves one. At most every orphanSnapshotAge/3; a
// snapshot in use (a mount under it) fails to go and is tried again.
func (m *Manager) sweepOrphanSnapshots(ctx context.Context) {
	if time.Since(m.lastSnapshotSweep) < orphanSnapshotAge/3 {
		return
	}
	m.lastSnapshotSweep = time.Now()
	ctrs, err := m.cfg.Client.ContainerService().List(ctx)
	if err != nil {
		return
	}
	used := make(map[string]bool, len(ctrs))
	for _, c := range ctrs {
		used[c.SnapshotKey], used[c.ID] = true, true
	}
	sn := m.cfg.Client.SnapshotService(m.cfg.Images.Snapshotter())
	var orphans []string
	_ = sn.Walk(ctx, func(_ context.Context, info snapshots.Info) error {
		if info.Kind == snapshots.KindActive && idRe.MatchString(info.Name) && !used[info.Name] &&
			time.Since(info.Created) > orphanSnapshotAge {
			orphans = append(orphans, info.Name)
		}
		return nil
	})
	for _, id := range orphans {
		if !m.claim(id) {
			continue // a create or delete of that id is under way
		}
		if _, err := m.cfg.Client.ContainerService().Get(ctx, id); errdefs.IsNotFound(err) {
			m.log.Warn("removing a sandbox snapshot without its container", "snapshot", id)
			m.removeSnapshot(ctx, id)
		}
		m.release(id)
	}
}
