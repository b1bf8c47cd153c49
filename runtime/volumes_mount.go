//go:build linux

// Room: volumes. A sandbox's volume mounts: parsed from a create, held
// while it lives (one read-write holder unless shared), put into its
// spec, released when it is deleted, and rebuilt from records at start.

package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"strings"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/runtime-spec/specs-go"
)

// volumeReserved are paths a volume may not be mounted on or under: the
// kernel's and boxd's own.
var volumeReserved = []string{"/proc", "/sys", "/dev", "/.boxd"}

// parseVolumeSpec reads NAME:/PATH[:ro|:rw].
func parseVolumeSpec(field, s string) (name, p string, ro bool, _ error) {
	parts := strings.Split(s, ":")
	if len(parts) == 3 {
		switch parts[2] {
		case "ro":
			ro = true
		case "rw":
		default:
			return "", "", false, fieldErr(field, "%q: the mode after the path must be ro or rw", s)
		}
		parts = parts[:2]
	}
	if len(parts) != 2 {
		return "", "", false, fieldErr(field, "%q: want NAME:/PATH or NAME:/PATH:ro", s)
	}
	name, p = parts[0], parts[1]
	if err := ValidateVolumeName(field, name); err != nil {
		return "", "", false, err
	}
	if err := checkMountPath(field, s, p); err != nil {
		return "", "", false, err
	}
	return name, p, ro, nil
}

// checkMountPath checks p, where a volume or bind of spec s is mounted.
func checkMountPath(field, s, p string) error {
	if !path.IsAbs(p) || path.Clean(p) != p || p == "/" || len(p) > maxPathBytes || strings.IndexByte(p, 0) >= 0 {
		return fieldErr(field, "%q: the path must be absolute, clean and not /", s)
	}
	for _, r := range volumeReserved {
		if p == r || strings.HasPrefix(p, r+"/") {
			return fieldErr(field, "%q: a volume cannot be mounted on or under %s", s, r)
		}
	}
	return nil
}

// attachVolumes resolves a create's volumes for ctx's caller and holds
// them under token (until settleVolumes or releaseVolumes): a second
// read-write holder of a volume not created shared is refused, naming
// the first.
func (m *Manager) attachVolumes(ctx context.Context, token string, r resolved, specs []string) ([]volumeMount, error) {
	if len(specs) > MaxSandboxVolumes {
		return nil, fieldErr("volumes", "%d volumes, at most %d allowed", len(specs), MaxSandboxVolumes)
	}
	if len(specs) > 0 && r.runtime == RuntimeGvisor {
		return nil, fmt.Errorf("volumes: gVisor sandboxes cannot mount volumes (their mounts are not ID-mapped): use runtime runc: %w", errdefs.ErrFailedPrecondition)
	}
	var out []volumeMount
	paths := map[string]bool{}
	ids := map[string]bool{}
	v := m.vols
	v.mu.Lock()
	defer v.mu.Unlock()
	for i, s := range specs {
		field := fmt.Sprintf("volumes[%d]", i)
		name, p, ro, err := parseVolumeSpec(field, s)
		if err != nil {
			return nil, err
		}
		if paths[p] {
			return nil, fieldErr(field, "%q: another volume is mounted at %s", s, p)
		}
		paths[p] = true
		meta, err := v.lookupLocked(ctx, name)
		if err != nil {
			return nil, err
		}
		if ids[meta.ID] {
			return nil, fieldErr(field, "%q: volume %s is mounted twice", s, name)
		}
		ids[meta.ID] = true
		if !ro && !meta.Shared {
			for h, u := range v.users[meta.ID] {
				if !u.ReadOnly {
					return nil, fmt.Errorf("%s: volume %q is mounted read-write by sandbox %s (mount it :ro, or create the volume --shared): %w", field, name, h, errdefs.ErrFailedPrecondition)
				}
			}
		}
		out = append(out, volumeMount{ID: meta.ID, Name: meta.Name, Path: p, ReadOnly: ro, HostUID: meta.HostUID})
	}
	for _, vm := range out {
		v.holdLocked(vm, token)
	}
	return out, nil
}

func (v *volumes) holdLocked(vm volumeMount, holder string) {
	if v.users[vm.ID] == nil {
		v.users[vm.ID] = map[string]volumeMount{}
	}
	v.users[vm.ID][holder] = vm
}

// settleVolumes moves a create's holds from its token to the sandbox.
func (m *Manager) settleVolumes(token, id string) {
	v := m.vols
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, hs := range v.users {
		if vm, ok := hs[token]; ok {
			delete(hs, token)
			hs[id] = vm
		}
	}
}

// releaseVolumes drops every hold of holder (a failed create's token, a
// deleted sandbox's id).
func (m *Manager) releaseVolumes(holder string) {
	v := m.vols
	v.mu.Lock()
	defer v.mu.Unlock()
	for id, hs := range v.users {
		delete(hs, holder)
		if len(hs) == 0 {
			delete(v.users, id)
		}
	}
}

// volumeSpecMounts are a sandbox's volumes as spec mounts: bind mounts of
// the volumes' host mounts, ID-mapped from each volume's block to the
// sandbox's (its root owns what the volume's root owns), nosuid, nodev.
func (m *Manager) volumeSpecMounts(vms []volumeMount, hostID uint32) []specs.Mount {
	var out []specs.Mount
	for _, vm := range vms {
		out = append(out, idMappedBind(m.vols.store.MountPoint(vm.ID), vm.Path, vm.ReadOnly, vm.HostUID, vm.HostUID, hostID, m.cfg.IDMapSize))
	}
	return out
}

// idMappedBind is a nosuid, nodev bind mount of host directory src at
// dst, ID-mapped so that the size uids from uid and gids from gid (as
// the files have them on disk) are the sandbox's from hostID (its root
// first). runc applies the mapping (mount_setattr MOUNT_ATTR_IDMAP).
func idMappedBind(src, dst string, ro bool, uid, gid, hostID, size uint32, opts ...string) specs.Mount {
	mode := "rw"
	if ro {
		mode = "ro"
	}
	return specs.Mount{Destination: dst, Type: "bind", Source: src,
		Options:     append([]string{"bind", "nosuid", "nodev", mode}, opts...),
		UIDMappings: []specs.LinuxIDMapping{{ContainerID: uid, HostID: hostID, Size: size}},
		GIDMappings: []specs.LinuxIDMapping{{ContainerID: gid, HostID: hostID, Size: size}}}
}

// loadVolumes reads the volumes (mounting any a host restart lost), their
// quota charges, and who holds them from the sandboxes' records. Load
// calls it before anything takes a uid block or starts a sandbox.
func (m *Manager) loadVolumes(ctrs []containers.Container) {
	metas, errs := m.vols.store.Load()
	for _, err := range errs {
		m.log.Error("volume not loaded", "err", err)
	}
	v := m.vols
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, meta := range metas {
		v.byID[meta.ID] = meta
		m.inv.mu.Lock()
		m.inv.pending["volume:"+meta.ID] = volumeCharge(meta)
		for _, s := range v.store.Snapshots(meta.ID) {
			m.inv.pending["volsnap:"+meta.ID+"/"+s] = snapCharge(meta, s)
		}
		m.inv.mu.Unlock()
	}
	for _, c := range ctrs {
		var rec record
		if json.Unmarshal([]byte(c.Labels[LabelSandbox]), &rec) != nil {
			continue
		}
		for _, vm := range rec.Volumes {
			if _, ok := v.byID[vm.ID]; ok {
				v.holdLocked(vm, c.ID)
			}
		}
	}
}
