//go:build linux

// Room: volumes. Files in and out of a volume without a sandbox: a tar
// stream extracted into, or written from, the volume's host mount under
// the state directory (host-root-only; no running code sees it), with
// safetar's rules for hostile names, and every path resolved beneath the
// volume's root without following a symlink the volume holds.

package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"

	"github.com/boxd-dev/boxd/internal/safetar"
	"github.com/boxd-dev/boxd/internal/volume"
)

// holdForCopy finds ctx's caller's volume and holds it for a copy (a
// write: as its one read-write user, so no sandbox mounts it read-write
// meanwhile). A volume a sandbox mounts read-write is failed_precondition
// naming the sandbox: what a running writer changes under a copy would
// make it inconsistent.
func (m *Manager) holdForCopy(ctx context.Context, nameOrID string, write bool) (volume.Meta, func(), error) {
	v := m.vols
	v.mu.Lock()
	defer v.mu.Unlock()
	meta, err := v.lookupLocked(ctx, nameOrID)
	if err != nil {
		return volume.Meta{}, nil, err
	}
	for _, h := range v.holdersLocked(meta.ID) {
		if !v.users[meta.ID][h].ReadOnly {
			return volume.Meta{}, nil, fmt.Errorf("volume %q is mounted read-write by sandbox %s: copy files through that sandbox (boxctl cp), or after it is gone: %w", meta.Name, h, errdefs.ErrFailedPrecondition)
		}
	}
	token := "volume-cp:" + newID()
	v.holdLocked(volumeMount{ID: meta.ID, Name: meta.Name, ReadOnly: !write, HostUID: meta.HostUID}, token)
	return meta, func() { m.releaseVolumes(token) }, nil
}

// volumeRel checks a path in a volume (absolute, clean) and returns it
// relative to the volume's root ("." for the root).
func volumeRel(p string) (string, error) {
	if !path.IsAbs(p) || path.Clean(p) != p || len(p) > maxPathBytes || strings.IndexByte(p, 0) >= 0 {
		return "", fieldErr("path", "%q must be an absolute, clean path in the volume", p)
	}
	if p == "/" {
		return ".", nil
	}
	return p[1:], nil
}

// openBeneath opens the directory rel beneath root, never following a
// symlink (nor leaving the volume's filesystem).
func openBeneath(root int, rel string) (int, error) {
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV}
	for {
		fd, err := unix.Openat2(root, rel, &how)
		if err != unix.EINTR && err != unix.EAGAIN {
			return fd, err
		}
	}
}

// beneathErr turns a failed resolution of p into the caller's error.
func beneathErr(p string, err error) error {
	switch {
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.EXDEV):
		return fieldErr("path", "%q: a symlink in the volume is in the way (volume copies never follow symlinks)", p)
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR):
		return fmt.Errorf("path %q: no such directory in the volume: %w", p, errdefs.ErrNotFound)
	}
	return fmt.Errorf("path %q: %w", p, err)
}

// openVolumeRoot opens the volume's host mount.
func (m *Manager) openVolumeRoot(meta volume.Meta) (int, error) {
	mp := m.vols.store.MountPoint(meta.ID)
	fd, err := unix.Open(mp, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("volume %s: open %s: %w", meta.Name, mp, err)
	}
	return fd, nil
}

// VolumeCopyIn extracts the tar r into a volume with docker cp's rules:
// into dest if it is a directory, else as dest (the tar's top-level entry
// renamed) in dest's parent, which must be a directory. What it creates
// belongs to the volume's uid block (root in the sandboxes that mount
// it).
func (m *Manager) VolumeCopyIn(ctx context.Context, nameOrID, dest string, r io.Reader) error {
	rel, err := volumeRel(dest)
	if err != nil {
		return err
	}
	meta, release, err := m.holdForCopy(ctx, nameOrID, true)
	if err != nil {
		return err
	}
	defer release()
	root, err := m.openVolumeRoot(meta)
	if err != nil {
		return err
	}
	defer unix.Close(root)
	rename := ""
	dir, err := openBeneath(root, rel)
	if err != nil && rel != "." {
		// Not a directory (missing, a file, a symlink): dest names the
		// entry itself, in its parent.
		rename = path.Base(rel)
		dir, err = openBeneath(root, path.Dir(rel))
	}
	if err != nil {
		return beneathErr(dest, err)
	}
	defer unix.Close(dir)
	// The caller's symlinks are kept as they are: they point into the
	// sandboxes' roots, and nothing here follows them.
	opts := safetar.Options{Rename: rename, Links: safetar.LinksKeep, SkipDevices: true,
		Owner: &safetar.Owner{UID: int(meta.HostUID), GID: int(meta.HostUID)}}
	if err := safetar.Extract(r, fmt.Sprintf("/proc/self/fd/%d", dir), opts); err != nil {
		if errors.Is(err, safetar.ErrUnsafe) {
			return fieldErr("data", "%v", err)
		}
		return fmt.Errorf("volume %s: copy in %s: %w", meta.Name, dest, err)
	}
	// The tar reader stops at the end-of-archive marker; read the padding
	// after it, so the whole stream was taken.
	_, err = io.Copy(io.Discard, r)
	return err
}

// VolumeCopyOut writes a tar of src in a volume (its one top-level entry
// is src's base name; a symlink is stored as one, never followed).
func (m *Manager) VolumeCopyOut(ctx context.Context, nameOrID, src string, w io.Writer) error {
	rel, err := volumeRel(src)
	if err != nil {
		return err
	}
	if rel == "." {
		return fieldErr("path", "cannot copy out /: a tar needs a top-level name (copy out a directory in the volume)")
	}
	meta, release, err := m.holdForCopy(ctx, nameOrID, false)
	if err != nil {
		return err
	}
	defer release()
	root, err := m.openVolumeRoot(meta)
	if err != nil {
		return err
	}
	defer unix.Close(root)
	dir, err := openBeneath(root, path.Dir(rel))
	if err != nil {
		return beneathErr(src, err)
	}
	defer unix.Close(dir)
	base := path.Base(rel)
	var st unix.Stat_t
	if err := unix.Fstatat(dir, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("path %q: %w", src, errdefs.ErrNotFound)
	}
	if err := safetar.Write(w, fmt.Sprintf("/proc/self/fd/%d/%s", dir, base), base); err != nil {
		return fmt.Errorf("volume %s: copy out %s: %w", meta.Name, src, err)
	}
	return nil
}
