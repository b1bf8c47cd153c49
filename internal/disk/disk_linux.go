// Package disk caps the disk a sandbox can fill. The sandbox's writable
// layer (its overlayfs upper and work directories) lives on a filesystem
// of its own: a sparse ext4 image in boxd's state directory, loop-mounted
// over the overlayfs snapshot's directory before the sandbox starts. Writes
// past the size fail with ENOSPC inside the sandbox and the host's
// filesystem only ever holds the blocks the sandbox really wrote (the
// mount passes discards through, so deleted files give their space back).
//
// Why not project quotas (Docker's overlay2 `size`): they need the
// snapshotter's directory on XFS or ext4 built with quota support, which
// many kernels (this CI machine's among them) lack; a loop device and ext4
// are everywhere.
package disk

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/containerd/containerd/v2/core/mount"
	"golang.org/x/sys/unix"
)

// MinBytes is the smallest cap: ext4's own metadata needs a few MiB.
const MinBytes = 16 << 20

// Layer is the writable layer of one sandbox on its own filesystem.
type Layer struct {
	Image string // the ext4 image file on the host
	Dir   string // the snapshot directory holding fs/ (upper) and work/
}

// LayerOf finds the snapshot directory from overlayfs mount options: the
// parent of upperdir, which must also hold workdir.
func LayerOf(image string, mounts []mount.Mount) (Layer, error) {
	for _, m := range mounts {
		var upper, work string
		for _, o := range m.Options {
			if v, ok := strings.CutPrefix(o, "upperdir="); ok {
				upper = v
			}
			if v, ok := strings.CutPrefix(o, "workdir="); ok {
				work = v
			}
		}
		if upper == "" {
			continue
		}
		dir := filepath.Dir(upper)
		if work == "" || filepath.Dir(work) != dir {
			return Layer{}, fmt.Errorf("disk: upperdir %s and workdir %s are not siblings", upper, work)
		}
		return Layer{Image: image, Dir: dir}, nil
	}
	return Layer{}, errors.New("disk: the sandbox's snapshot has no overlayfs upper directory (a disk cap needs the overlayfs snapshotter)")
}

// Create makes the image (sparse, size bytes), formats it and mounts it
// over l.Dir, recreating the upper and work directories on it with the
// owner and mode they had. The directories must be empty: Create runs
// right after the snapshot is prepared.
func (l Layer) Create(size int64) error {
	if size < MinBytes {
		return fmt.Errorf("disk: %d bytes is below the minimum of %d", size, MinBytes)
	}
	f, err := os.OpenFile(l.Image, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("disk: %w", err)
	}
	err = f.Truncate(size)
	f.Close()
	if err != nil {
		os.Remove(l.Image)
		return fmt.Errorf("disk: size image: %w", err)
	}
	// No reserved blocks (the sandbox gets what it asked for); inode and
	// journal tables initialised lazily by the kernel, so mkfs writes only
	// a few MiB whatever the size; no blocks reserved for growing the
	// filesystem online, which boxd never does (writing them is most of
	// mkfs's time for a 10g image: 33 ms with them, 8 ms without, here).
	out, err := exec.Command("mkfs.ext4", "-q", "-F", "-m", "0", "-O", "^resize_inode",
		"-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard", l.Image).CombinedOutput()
	if err != nil {
		os.Remove(l.Image)
		return fmt.Errorf("disk: mkfs.ext4 (package e2fsprogs): %v: %s", err, strings.TrimSpace(string(out)))
	}
	var owners [2]unix.Stat_t
	for i, sub := range []string{"fs", "work"} {
		if err := unix.Lstat(filepath.Join(l.Dir, sub), &owners[i]); err != nil {
			os.Remove(l.Image)
			return fmt.Errorf("disk: %w", err)
		}
	}
	if err := l.Mount(); err != nil {
		os.Remove(l.Image)
		return err
	}
	for i, sub := range []string{"fs", "work"} {
		p := filepath.Join(l.Dir, sub)
		st := owners[i]
		err := os.Mkdir(p, 0)
		if err == nil {
			err = os.Lchown(p, int(st.Uid), int(st.Gid))
		}
		if err == nil {
			err = os.Chmod(p, os.FileMode(st.Mode&0o7777))
		}
		if err != nil {
			l.Unmount()
			os.Remove(l.Image)
			return fmt.Errorf("disk: %w", err)
		}
	}
	os.Remove(filepath.Join(l.Dir, "lost+found"))
	return nil
}

// Mounted reports whether l.Dir is the root of a mount (the image's).
func (l Layer) Mounted() (bool, error) {
	var dir, parent unix.Stat_t
	if err := unix.Stat(l.Dir, &dir); err != nil {
		return false, err
	}
	if err := unix.Stat(filepath.Dir(l.Dir), &parent); err != nil {
		return false, err
	}
	return dir.Dev != parent.Dev, nil
}

// Mount loop-mounts the image over l.Dir (after a host reboot, before the
// sandbox's init is started again). nodev and nosuid: nothing on it is a
// device or a setuid program for the host.
func (l Layer) Mount() error {
	m := mount.Mount{Type: "ext4", Source: l.Image, Options: []string{"loop", "discard", "nodev", "nosuid", "noatime"}}
	if err := m.Mount(l.Dir); err != nil {
		return fmt.Errorf("disk: mount %s on %s: %w", l.Image, l.Dir, err)
	}
	return nil
}

// Unmount detaches the image from l.Dir (its loop device is freed with it,
// autoclear); not mounted is not an error.
func (l Layer) Unmount() error {
	mounted, err := l.Mounted()
	if errors.Is(err, os.ErrNotExist) || err == nil && !mounted {
		return nil
	}
	if err := unix.Unmount(l.Dir, 0); err != nil && !errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("disk: unmount %s: %w", l.Dir, err)
	}
	return nil
}

// Usage is the bytes used on the sandbox's filesystem and its size.
func (l Layer) Usage() (used, size int64, _ error) {
	var st unix.Statfs_t
	if err := unix.Statfs(l.Dir, &st); err != nil {
		return 0, 0, fmt.Errorf("disk: statfs %s: %w", l.Dir, err)
	}
	return int64(st.Blocks-st.Bfree) * st.Bsize, int64(st.Blocks) * st.Bsize, nil
}
