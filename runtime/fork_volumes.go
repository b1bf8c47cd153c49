//go:build linux

// Room: volumes. What a fork mounts of its source's volumes: the same
// volumes read-only (the default), the same volumes as the source mounts
// them (ShareVolumes, only volumes created shared), or a clone of each
// per fork (CloneVolumes, new volumes of the caller's).

package runtime

import (
	"context"
	"fmt"

	"github.com/containerd/errdefs"
)

// Labels boxd puts on a volume a fork's --clone-volumes made.
const (
	LabelVolumeFork       = "boxd.fork"        // the fork's sandbox id
	LabelVolumeForkSource = "boxd.fork-source" // the volume it is a clone of
)

// forkCloneName is the name of fork's clone of volume name: the name,
// cut to fit, a dash and the fork's id, so `volume ls` shows it next to
// its source and a search for the fork's id finds it.
func forkCloneName(name, forkID string) string {
	if max := 63 - len(forkID) - 1; len(name) > max {
		name = name[:max]
	}
	return name + "-" + forkID
}

// forkVolumes gives each fork in rs an id and its volumes, held under
// that id (a fork's deletion releases them as a sandbox's). The returned
// undo, deferred with the fork's error, releases the holds and removes the
// clones if there is one (and does nothing otherwise).
func (m *Manager) forkVolumes(ctx context.Context, req ForkRequest, src *Sandbox, rs []resolved) (undo func(failed *error), _ error) {
	var clones []string
	undo = func(failed *error) {
		if *failed == nil {
			return
		}
		cctx := context.WithoutCancel(ctx)
		for i := range rs {
			if rs[i].id != "" {
				m.releaseVolumes(rs[i].id)
			}
		}
		for _, id := range clones {
			if err := m.RemoveVolume(cctx, id, true); err != nil {
				m.log.Error("fork failed; remove a volume clone", "volume", id, "err", err)
			}
		}
	}
	if req.CloneVolumes && req.ShareVolumes {
		return undo, fieldErr("share_volumes", "clone_volumes and share_volumes exclude each other")
	}
	for i := range rs {
		rs[i].id = newID()
		if len(src.Volumes) == 0 {
			continue
		}
		var vms []volumeMount
		for _, sv := range src.Volumes {
			vm := volumeMount{ID: sv.ID, Name: sv.Name, Path: sv.Path, ReadOnly: true}
			switch {
			case req.ShareVolumes:
				vm.ReadOnly = sv.ReadOnly
			case req.CloneVolumes:
				vol, err := m.CreateVolume(ctx, VolumeRequest{
					Name: forkCloneName(sv.Name, rs[i].id), From: sv.ID,
					Labels: map[string]string{LabelVolumeFork: rs[i].id, LabelVolumeForkSource: sv.Name},
				})
				if err != nil {
					return undo, fmt.Errorf("clone volume %q for a fork: %w", sv.Name, err)
				}
				clones = append(clones, vol.ID)
				vm.ID, vm.Name, vm.ReadOnly = vol.ID, vol.Name, sv.ReadOnly
			}
			vms = append(vms, vm)
		}
		if err := m.holdForkVolumes(rs[i].id, vms, req.ShareVolumes); err != nil {
			return undo, err
		}
		rs[i].volumes = vms
	}
	return undo, nil
}

// holdForkVolumes holds vms for fork id. Each volume must still exist
// (one removed with --force since the source mounted it is not_found);
// shared mounts need volumes created shared.
func (m *Manager) holdForkVolumes(id string, vms []volumeMount, share bool) error {
	v := m.vols
	v.mu.Lock()
	defer v.mu.Unlock()
	for i, vm := range vms {
		meta, ok := v.byID[vm.ID]
		if !ok {
			return volumeNotFound(vm.Name)
		}
		if share && !meta.Shared {
			return fmt.Errorf("share_volumes: volume %q was not created --shared (fork with the default read-only mounts, or --clone-volumes): %w", vm.Name, errdefs.ErrFailedPrecondition)
		}
		vms[i].HostUID = meta.HostUID
	}
	for _, vm := range vms {
		v.holdLocked(vm, id)
	}
	return nil
}
