//go:build linux

// Room: volumes. Named volumes: create, list, inspect and remove them,
// who mounts them (one read-write holder unless shared), their charge to
// the owner's disk quota, and their mounts in a sandbox's spec. The host
// side (images, mounts) is internal/volume.

package runtime

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/containerd/errdefs"

	"github.com/boxd-dev/boxd/internal/volume"
)

// Bounds on volumes.
const (
	DefaultVolumeSize = 1 << 30
	MaxSandboxVolumes = 16
)

// VolumeRequest is a new volume.
type VolumeRequest struct {
	Name   string
	Size   string // "2g"; "": DefaultVolumeSize
	Labels map[string]string
	Shared bool
	// From makes the volume a copy of NAME or NAME@SNAP (volumes_snap.go).
	From string
}

// Volume is a volume as the API shows it.
type Volume struct {
	volume.Meta
	UsedBytes int64
	Mounts    []VolumeUse
	Snapshots []string
}

// VolumeUse is one sandbox's mount of a volume.
type VolumeUse struct {
	SandboxID string
	Path      string
	ReadOnly  bool
}

// SandboxVolume is one volume a sandbox mounts, as inspect shows it.
type SandboxVolume struct {
	Name     string
	ID       string
	Path     string // inside the sandbox
	ReadOnly bool
}

func sandboxVolumes(vms []volumeMount) []SandboxVolume {
	var out []SandboxVolume
	for _, vm := range vms {
		out = append(out, SandboxVolume{Name: vm.Name, ID: vm.ID, Path: vm.Path, ReadOnly: vm.ReadOnly})
	}
	return out
}

// volumeMount is a volume mount as a sandbox's record stores it.
type volumeMount struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Path     string `json:"path"`
	ReadOnly bool   `json:"ro,omitempty"`
	HostUID  uint32 `json:"host_uid"` // the volume's block (its files' owner on disk)
}

// volumes is what boxd knows of its volumes: their metadata (the store's
// meta.json files hold it across restarts) and their holders, each a
// sandbox id or the token of a create under way (rebuilt from the
// sandboxes' records at start).
type volumes struct {
	store volume.Store
	mu    sync.Mutex
	byID  map[string]volume.Meta
	users map[string]map[string]volumeMount // volume id -> holder -> mount
	busy  map[string]bool                   // "OWNER:NAME" being created
}

func newVolumes(stateDir string) *volumes {
	return &volumes{store: volume.Store{Dir: filepath.Join(stateDir, "volumes")},
		byID: map[string]volume.Meta{}, users: map[string]map[string]volumeMount{}, busy: map[string]bool{}}
}

// blocks are the uid blocks volumes hold (idRanges.load marks them).
func (v *volumes) blocks() []uint32 {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []uint32
	for _, m := range v.byID {
		out = append(out, m.HostUID)
	}
	return out
}

func volumeNotFound(name string) error {
	return fmt.Errorf("volume %q not found: %w", name, errdefs.ErrNotFound)
}

// lookupLocked finds a volume by id or name for ctx's caller: its own
// first; an admin's lookup falls back to every owner's. Another user's
// volume is not found, with the message of a missing one.
func (v *volumes) lookupLocked(ctx context.Context, nameOrID string) (volume.Meta, error) {
	if m, ok := v.byID[nameOrID]; ok && mayUse(ctx, m.Owner) {
		return m, nil
	}
	uid := ownerUID(ctx)
	var others []volume.Meta
	for _, m := range v.byID {
		if m.Name != nameOrID {
			continue
		}
		if m.Owner == uid {
			return m, nil
		}
		if mayUse(ctx, m.Owner) {
			others = append(others, m)
		}
	}
	switch len(others) {
	case 0:
		return volume.Meta{}, volumeNotFound(nameOrID)
	case 1:
		return others[0], nil
	}
	return volume.Meta{}, fmt.Errorf("volume name %q is used by %d owners: name it by id: %w", nameOrID, len(others), errdefs.ErrFailedPrecondition)
}

// holdersLocked lists a volume's holders, sorted.
func (v *volumes) holdersLocked(id string) []string {
	var out []string
	for h := range v.users[id] {
		out = append(out, h)
	}
	sort.Strings(out)
	return out
}

// ValidateVolumeName checks a volume name; field names the request field.
func ValidateVolumeName(field, name string) error {
	if name == "" || len(name) > maxNameLen || !nameRe.MatchString(name) || strings.Contains(name, "..") {
		return fieldErr(field, "%q must be 1-%d characters of letters, digits, _ . -, starting with a letter or digit, without \"..\"", name, maxNameLen)
	}
	return nil
}

// volumeCharge is what a volume counts against its owner's disk quota.
func volumeCharge(m volume.Meta) owned {
	return owned{uid: m.Owner, layerOnly: true, layers: []LayerCharge{{Key: "volume:" + m.ID, Bytes: m.SizeBytes}}}
}

// parseVolumeRequest checks a new volume's fields.
func (m *Manager) parseVolumeRequest(req VolumeRequest) (int64, error) {
	if err := ValidateVolumeName("name", req.Name); err != nil {
		return 0, err
	}
	size := int64(DefaultVolumeSize)
	if req.Size != "" && req.From != "" {
		return 0, fieldErr("size", "a copy (from) has its source's size")
	}
	if req.Size != "" {
		var err error
		if size, err = ParseSize(req.Size); err != nil {
			return 0, fieldErr("size", "%v", err)
		}
	}
	if size < volume.MinBytes {
		return 0, fieldErr("size", "%d bytes is below the minimum of %d (16m)", size, volume.MinBytes)
	}
	if max := m.maxDisk(); max > 0 && size > max {
		return 0, fieldErr("size", "%d bytes is more than the %d bytes of the filesystem volumes live on", size, max)
	}
	if len(req.Labels) > MaxLabels {
		return 0, fieldErr("labels", "%d labels, at most %d allowed", len(req.Labels), MaxLabels)
	}
	for k, val := range req.Labels {
		if len(k) > maxLabelKey || !labelKeyRe.MatchString(k) {
			return 0, fieldErr("labels", "key %q must be 1-128 characters of letters, digits, _ . / -", k)
		}
		if len(val) > maxLabelVal {
			return 0, fieldErr("labels", "value of %q is longer than %d bytes", k, maxLabelVal)
		}
	}
	return size, nil
}

// CreateVolume makes an empty volume owned by ctx's caller.
func (m *Manager) CreateVolume(ctx context.Context, req VolumeRequest) (*Volume, error) {
	size, err := m.parseVolumeRequest(req)
	if err != nil {
		return nil, err
	}
	owner := ownerUID(ctx)
	key := fmt.Sprintf("%d:%s", owner, req.Name)
	v := m.vols
	v.mu.Lock()
	exists := v.busy[key]
	for _, x := range v.byID {
		exists = exists || x.Owner == owner && x.Name == req.Name
	}
	if !exists {
		v.busy[key] = true
	}
	v.mu.Unlock()
	if exists {
		return nil, fmt.Errorf("a volume named %q already exists: %w", req.Name, errdefs.ErrAlreadyExists)
	}
	defer func() {
		v.mu.Lock()
		delete(v.busy, key)
		v.mu.Unlock()
	}()
	meta := volume.Meta{ID: newID(), Name: req.Name, Owner: owner, SizeBytes: size, Labels: req.Labels,
		CreatedAt: time.Now().UTC().Truncate(time.Second), Shared: req.Shared}
	if req.From != "" {
		return m.cloneVolume(ctx, meta, req.From)
	}
	if err := m.inv.reserveQuota("volume:"+meta.ID, volumeCharge(meta), m.cfg.Quotas); err != nil {
		return nil, err
	}
	if meta.HostUID, err = m.ids.take(ctx, m); err != nil {
		m.inv.releaseQuota("volume:" + meta.ID)
		return nil, fmt.Errorf("create volume %s: %w", req.Name, err)
	}
	if err := v.store.Create(meta); err != nil {
		m.ids.give(meta.HostUID)
		m.inv.releaseQuota("volume:" + meta.ID)
		return nil, fmt.Errorf("create volume %s: %w", req.Name, err)
	}
	v.mu.Lock()
	v.byID[meta.ID] = meta
	v.mu.Unlock()
	m.log.Info("volume created", "volume", meta.ID, "name", meta.Name, "owner", owner, "size", size)
	return &Volume{Meta: meta}, nil
}

// describeLocked fills a volume's use.
func (v *volumes) describeLocked(meta volume.Meta) Volume {
	out := Volume{Meta: meta}
	out.UsedBytes, _ = v.store.Usage(meta.ID)
	out.Snapshots = v.store.Snapshots(meta.ID)
	for _, h := range v.holdersLocked(meta.ID) {
		vm := v.users[meta.ID][h]
		out.Mounts = append(out.Mounts, VolumeUse{SandboxID: h, Path: vm.Path, ReadOnly: vm.ReadOnly})
	}
	return out
}

// ListVolumes lists the volumes ctx's caller may see, by name.
func (m *Manager) ListVolumes(ctx context.Context) []Volume {
	v := m.vols
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []Volume
	for _, meta := range v.byID {
		if mayUse(ctx, meta.Owner) {
			out = append(out, v.describeLocked(meta))
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// GetVolume describes one volume.
func (m *Manager) GetVolume(ctx context.Context, nameOrID string) (*Volume, error) {
	v := m.vols
	v.mu.Lock()
	defer v.mu.Unlock()
	meta, err := v.lookupLocked(ctx, nameOrID)
	if err != nil {
		return nil, err
	}
	out := v.describeLocked(meta)
	return &out, nil
}

// RemoveVolume deletes a volume. One that sandboxes mount is refused
// unless force; then its filesystem is shut down first, so their I/O
// there fails with EIO rather than writing into a deleted volume.
func (m *Manager) RemoveVolume(ctx context.Context, nameOrID string, force bool) error {
	v := m.vols
	v.mu.Lock()
	defer v.mu.Unlock()
	meta, err := v.lookupLocked(ctx, nameOrID)
	if err != nil {
		return err
	}
	holders := v.holdersLocked(meta.ID)
	snaps := v.store.Snapshots(meta.ID)
	if len(holders) > 0 && !force {
		return fmt.Errorf("volume %q is mounted by sandbox %s: remove them first or force: %w", meta.Name, strings.Join(holders, ", "), errdefs.ErrFailedPrecondition)
	}
	if err := v.store.Remove(meta.ID, len(holders) > 0); err != nil {
		return fmt.Errorf("remove volume %s: %w", meta.Name, err)
	}
	delete(v.byID, meta.ID)
	delete(v.users, meta.ID)
	m.inv.releaseQuota("volume:" + meta.ID)
	for _, s := range snaps {
		m.inv.releaseQuota("volsnap:" + meta.ID + "/" + s)
	}
	if len(holders) == 0 {
		// Files of the block are gone with the image; with holders left,
		// their mounts keep the (shut down) filesystem until they end,
		// and the block stays taken until boxd restarts.
		m.ids.give(meta.HostUID)
	}
	m.log.Info("volume removed", "volume", meta.ID, "name", meta.Name, "forced_from", holders)
	return nil
}
