// Room: reconcile. State directories a killed boxd left without their
// sandbox.

package runtime

import (
	"os"
	"path/filepath"

	"github.com/containerd/containerd/v2/core/containers"
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
