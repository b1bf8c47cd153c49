//go:build linux

// Room: volumes. The file API on a volume without a sandbox: stat, list
// and read through the volume's host mount, with volumes_cp.go's rules
// (held as a reader, so no sandbox mounts it read-write meanwhile; every
// path resolved beneath the volume's root without following a symlink).
// Owners are reported as the sandboxes that mount the volume see them.

package runtime

import (
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"time"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"

	"github.com/boxd-dev/boxd/agent/wire"
	"github.com/boxd-dev/boxd/internal/volume"
)

// MaxVolumeDirEntries bounds one ListVolumeDir answer.
const MaxVolumeDirEntries = 10000

// volumeStat describes st as a sandbox mounting the volume sees it: the
// volume's uid block from 0, any other id as the overflow id 65534.
func volumeStat(meta volume.Meta, size uint32, st *unix.Stat_t, p, name string) wire.FileStat {
	id := func(v uint32) uint32 {
		if v >= meta.HostUID && v-meta.HostUID < size {
			return v - meta.HostUID
		}
		return 65534
	}
	fi := wire.FileStat{Path: p, Name: name, Size: st.Size, Mode: st.Mode & 0o7777, UID: id(st.Uid), GID: id(st.Gid),
		Mtime: time.Unix(st.Mtim.Sec, st.Mtim.Nsec).UTC()}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		fi.Type = wire.FileTypeDir
	case unix.S_IFLNK:
		fi.Type = wire.FileTypeSymlink
	case unix.S_IFIFO:
		fi.Type = wire.FileTypeFIFO
	case unix.S_IFSOCK:
		fi.Type = wire.FileTypeSocket
	case unix.S_IFCHR:
		fi.Type = wire.FileTypeChar
	case unix.S_IFBLK:
		fi.Type = wire.FileTypeBlock
	default:
		fi.Type = wire.FileTypeRegular
	}
	return fi
}

// statAt describes name in dirfd without following it.
func (m *Manager) statAt(meta volume.Meta, dirfd int, name, p string) (wire.FileStat, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW|unix.AT_EMPTY_PATH); err != nil {
		return wire.FileStat{}, err
	}
	fi := volumeStat(meta, m.cfg.IDMapSize, &st, p, path.Base(p))
	if fi.Type == wire.FileTypeSymlink {
		buf := make([]byte, 4096)
		if n, err := unix.Readlinkat(dirfd, name, buf); err == nil {
			fi.LinkTarget = string(buf[:n])
		}
	}
	return fi, nil
}

// withVolumeDir holds the caller's volume as a reader, opens the directory
// dir (relative, "." the root) beneath its root and calls f with it.
func (m *Manager) withVolumeDir(ctx context.Context, nameOrID, p, dir string, f func(meta volume.Meta, dirfd int) error) error {
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
	fd, err := openBeneath(root, dir)
	if err != nil {
		return beneathErr(p, err)
	}
	defer unix.Close(fd)
	return f(meta, fd)
}

// StatVolumePath describes p in a volume, a final symlink not followed.
func (m *Manager) StatVolumePath(ctx context.Context, nameOrID, p string) (wire.FileStat, error) {
	rel, err := volumeRel(p)
	if err != nil {
		return wire.FileStat{}, err
	}
	var fi wire.FileStat
	err = m.withVolumeDir(ctx, nameOrID, p, path.Dir(rel), func(meta volume.Meta, dir int) error {
		name := path.Base(rel)
		if rel == "." {
			name = ""
		}
		if fi, err = m.statAt(meta, dir, name, p); err != nil {
			return fmt.Errorf("path %q: %w", p, errdefs.ErrNotFound)
		}
		return nil
	})
	return fi, err
}

// ListVolumeDir lists the directory p of a volume, sorted by name, at
// most MaxVolumeDirEntries (truncated: more were left out).
func (m *Manager) ListVolumeDir(ctx context.Context, nameOrID, p string) (entries []wire.FileStat, truncated bool, err error) {
	rel, err := volumeRel(p)
	if err != nil {
		return nil, false, err
	}
	err = m.withVolumeDir(ctx, nameOrID, p, rel, func(meta volume.Meta, dir int) error {
		// The O_PATH descriptor cannot be read: open the same directory
		// for reading through it (no name is resolved again).
		rfd, err := unix.Openat(dir, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("path %q: %w", p, err)
		}
		f := os.NewFile(uintptr(rfd), p)
		defer f.Close()
		names, err := f.Readdirnames(-1)
		if err != nil {
			return fmt.Errorf("path %q: %w", p, err)
		}
		slices.Sort(names)
		if len(names) > MaxVolumeDirEntries {
			names, truncated = names[:MaxVolumeDirEntries], true
		}
		for _, n := range names {
			fi, err := m.statAt(meta, rfd, n, n)
			if err != nil {
				continue // gone meanwhile
			}
			entries = append(entries, fi)
		}
		return nil
	})
	return entries, truncated, err
}

// ReadVolumeFile writes the regular file p of a volume to w (the file's
// description first, through info).
func (m *Manager) ReadVolumeFile(ctx context.Context, nameOrID, p string, info func(wire.FileStat) error, w io.Writer) error {
	rel, err := volumeRel(p)
	if err != nil {
		return err
	}
	return m.withVolumeDir(ctx, nameOrID, p, path.Dir(rel), func(meta volume.Meta, dir int) error {
		// Only a regular file is opened (never a FIFO or a device), and
		// only the one that was checked.
		fi, err := m.statAt(meta, dir, path.Base(rel), p)
		if err != nil {
			return fmt.Errorf("path %q: %w", p, errdefs.ErrNotFound)
		}
		if fi.Type != wire.FileTypeRegular {
			return fieldErr("path", "%q is a %s, not a regular file (volume reads never follow symlinks)", p, fi.Type)
		}
		fd, err := unix.Openat(dir, path.Base(rel), unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
		if err != nil {
			return fmt.Errorf("path %q: %w", p, errdefs.ErrNotFound)
		}
		f := os.NewFile(uintptr(fd), p)
		defer f.Close()
		if fi, err = m.statAt(meta, fd, "", p); err != nil || fi.Type != wire.FileTypeRegular {
			return fmt.Errorf("path %q changed while opened: %w", p, errdefs.ErrFailedPrecondition)
		}
		if err := info(fi); err != nil {
			return err
		}
		if _, err := io.Copy(w, io.LimitReader(f, fi.Size)); err != nil {
			return fmt.Errorf("volume %s: read %s: %w", meta.Name, p, err)
		}
		return nil
	})
}
