//go:build linux

// Room: volumes. Snapshots of a volume and volumes made as copies of
// another or of a snapshot (internal/volume copies the images).

package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/containerd/errdefs"

	"github.com/boxd-dev/boxd/internal/volume"
)

// snapCharge is what a snapshot counts against its owner's disk quota:
// the volume's size, which its copy may fill.
func snapCharge(m volume.Meta, snap string) owned {
	return owned{uid: m.Owner, layerOnly: true, layers: []LayerCharge{{Key: "volsnap:" + m.ID + "/" + snap, Bytes: m.SizeBytes}}}
}

// SnapshotVolume keeps a copy of a volume's files as they are now.
func (m *Manager) SnapshotVolume(ctx context.Context, nameOrID, snap string) (*Volume, error) {
	if err := ValidateVolumeName("snapshot", snap); err != nil {
		return nil, err
	}
	v := m.vols
	// The copy holds the volumes' lock: no rm or mount change meanwhile.
	v.mu.Lock()
	defer v.mu.Unlock()
	meta, err := v.lookupLocked(ctx, nameOrID)
	if err != nil {
		return nil, err
	}
	token := "volsnap:" + meta.ID + "/" + snap
	if err := m.inv.reserveQuota(token, snapCharge(meta, snap), m.cfg.Quotas); err != nil {
		return nil, err
	}
	if err := v.store.Snapshot(meta.ID, snap); err != nil {
		m.inv.releaseQuota(token)
		if errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("volume %q already has a snapshot %q: %w", meta.Name, snap, errdefs.ErrAlreadyExists)
		}
		return nil, fmt.Errorf("snapshot volume %s: %w", meta.Name, err)
	}
	m.log.Info("volume snapshot", "volume", meta.ID, "snapshot", snap)
	out := v.describeLocked(meta)
	return &out, nil
}

// parseFrom reads CreateVolumeRequest.from: NAME or NAME@SNAP.
func parseFrom(from string) (name, snap string, _ error) {
	name, snap, hasSnap := strings.Cut(from, "@")
	if err := ValidateVolumeName("from", name); err != nil {
		return "", "", err
	}
	if hasSnap {
		if err := ValidateVolumeName("from", snap); err != nil {
			return "", "", err
		}
	}
	return name, snap, nil
}

// cloneVolume makes meta (name, owner, labels set) a copy of from. Its
// files keep the source's owners, so it shares the source's uid block
// (held once more).
func (m *Manager) cloneVolume(ctx context.Context, meta volume.Meta, from string) (*Volume, error) {
	name, snap, err := parseFrom(from)
	if err != nil {
		return nil, err
	}
	// The uid blocks' first load reads the volumes' blocks (v.mu): it
	// must not run under v.mu, which hold below is called under.
	if err := m.ids.ensureLoaded(ctx, m); err != nil {
		return nil, err
	}
	v := m.vols
	v.mu.Lock()
	defer v.mu.Unlock()
	src, err := v.lookupLocked(ctx, name)
	if err != nil {
		return nil, err
	}
	if src.Owner != meta.Owner {
		// An admin may read another's volume but not copy it into its own.
		return nil, volumeNotFound(name)
	}
	if snap != "" {
		if _, err := os.Stat(v.store.SnapshotPath(src.ID, snap)); err != nil {
			return nil, fmt.Errorf("volume %q has no snapshot %q: %w", name, snap, errdefs.ErrNotFound)
		}
	}
	meta.SizeBytes, meta.HostUID = src.SizeBytes, src.HostUID
	meta.CreatedAt = time.Now().UTC().Truncate(time.Second)
	if err := m.inv.reserveQuota("volume:"+meta.ID, volumeCharge(meta), m.cfg.Quotas); err != nil {
		return nil, err
	}
	if err := m.ids.hold(ctx, m, src.HostUID); err != nil {
		m.inv.releaseQuota("volume:" + meta.ID)
		return nil, err
	}
	if err := v.store.CreateFrom(meta, src.ID, snap); err != nil {
		m.ids.give(src.HostUID)
		m.inv.releaseQuota("volume:" + meta.ID)
		return nil, fmt.Errorf("create volume %s from %s: %w", meta.Name, from, err)
	}
	v.byID[meta.ID] = meta
	m.log.Info("volume cloned", "volume", meta.ID, "name", meta.Name, "from", from)
	out := v.describeLocked(meta)
	return &out, nil
}

// ensureLoaded reads the blocks in use if nothing has yet.
func (r *idRanges) ensureLoaded(ctx context.Context, m *Manager) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.load(ctx, m)
}

// hold takes one more reference to a block in use (a clone's files keep
// its source's owners); the blocks are loaded already (ensureLoaded).
func (r *idRanges) hold(_ context.Context, _ *Manager, start uint32) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.loaded {
		return fmt.Errorf("uid ranges: not loaded")
	}
	r.used[start]++
	return nil
}
