// Room: resources. Disk caps: a sandbox's writable layer on a
// filesystem of its own.

package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/containerd/containerd/v2/client"
	"golang.org/x/sys/unix"

	"github.com/boxd-dev/boxd/internal/disk"
)

// diskImage is the host file holding a capped sandbox's writable layer. It
// is in the sandbox's state directory (host root only), so it goes with it.
func (m *Manager) diskImage(id string) string {
	return filepath.Join(m.sandboxDir(id), "disk.ext4")
}

// diskLayer locates a sandbox's writable layer for its disk image.
func (m *Manager) diskLayer(ctx context.Context, id, snapshotter, key string) (disk.Layer, error) {
	mounts, err := m.cfg.Client.SnapshotService(snapshotter).Mounts(ctx, key)
	if err != nil {
		return disk.Layer{}, fmt.Errorf("disk: snapshot mounts: %w", err)
	}
	return disk.LayerOf(m.diskImage(id), mounts)
}

// containerDisk is the disk layer of an existing sandbox, and false when it
// has no cap.
func (m *Manager) containerDisk(ctx context.Context, ctr client.Container) (disk.Layer, bool, error) {
	info, err := ctr.Info(ctx, client.WithoutRefreshedMetadata)
	if err != nil {
		return disk.Layer{}, false, err
	}
	var rec record
	if json.Unmarshal([]byte(info.Labels[LabelSandbox]), &rec) != nil || rec.Disk == 0 {
		return disk.Layer{}, false, nil
	}
	l, err := m.diskLayer(ctx, ctr.ID(), info.Snapshotter, info.SnapshotKey)
	return l, err == nil, err
}

// ensureDisk mounts a capped sandbox's disk image again if it is not (the
// host restarted): its init must never start on the bare snapshot
// directory, which has neither the files nor the cap.
func (m *Manager) ensureDisk(ctx context.Context, ctr client.Container) error {
	l, ok, err := m.containerDisk(ctx, ctr)
	if err != nil || !ok {
		return err
	}
	mounted, err := l.Mounted()
	if err != nil {
		return err
	}
	if mounted {
		return nil
	}
	m.log.Info("mounting the sandbox's disk image again", "sandbox", ctr.ID(), "image", l.Image)
	return l.Mount()
}

// diskUsage fills the disk figures of sb (inspect).
func (m *Manager) diskUsage(ctx context.Context, ctr client.Container, sb *Sandbox) {
	l, ok, err := m.containerDisk(ctx, ctr)
	if err != nil || !ok {
		return
	}
	used, _, err := l.Usage()
	if err == nil {
		sb.DiskUsedBytes = used
	}
}

// maxDisk is the largest cap a create may ask for: the size of the
// filesystem the images live on (they are sparse, so several sandboxes may
// together promise more than it has, as memory limits may).
func (m *Manager) maxDisk() int64 {
	var st unix.Statfs_t
	if err := unix.Statfs(m.cfg.StateDir, &st); err != nil {
		return 0
	}
	return int64(st.Blocks) * st.Bsize
}
