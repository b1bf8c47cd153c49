// Package volume keeps named volumes on the host: each one a sparse ext4
// image of its own in boxd's state directory (<dir>/<id>/disk.ext4),
// loop-mounted at <dir>/<id>/mnt while boxd runs, and bind-mounted from
// there into the sandboxes that ask for it. It is internal/disk's
// mechanism for a sandbox's writable layer, applied to a filesystem that
// outlives sandboxes: the image's size is a hard cap (ENOSPC inside the
// sandbox) and the host holds only the blocks written (discard passes
// deletions through).
//
// A volume's files are owned on disk by the volume's own block of host
// ids (Meta.HostUID): never host root, never a user's uid, never a
// sandbox's block. Each sandbox mounts it ID-mapped so that the volume's
// block appears as the sandbox's own (its root owns the volume's root).
package volume

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/containerd/containerd/v2/core/mount"
	"golang.org/x/sys/unix"
)

// MinBytes is the smallest volume: ext4's own metadata needs a few MiB.
const MinBytes = 16 << 20

// Meta is what a volume's meta.json holds.
type Meta struct {
	ID        string            `json:"id"`
	Name      string            `json:"name"`
	Owner     uint32            `json:"owner"`
	SizeBytes int64             `json:"size_bytes"`
	Labels    map[string]string `json:"labels,omitempty"`
	CreatedAt time.Time         `json:"created_at"`
	Shared    bool              `json:"shared,omitempty"`
	// HostUID is the first id of the volume's own uid and gid block: the
	// owner of its files on disk.
	HostUID uint32 `json:"host_uid"`
}

// Store is the directory holding every volume (host root's, 0700).
type Store struct{ Dir string }

func (s Store) dir(id string) string   { return filepath.Join(s.Dir, id) }
func (s Store) image(id string) string { return filepath.Join(s.dir(id), "disk.ext4") }
func (s Store) meta(id string) string  { return filepath.Join(s.dir(id), "meta.json") }

// MountPoint is where the volume's filesystem is mounted on the host, the
// source of the sandboxes' bind mounts.
func (s Store) MountPoint(id string) string { return filepath.Join(s.dir(id), "mnt") }

// Create makes, formats and mounts the volume, then writes its meta.json
// last: a directory without one is a create that did not finish, which
// Load removes. On error nothing of it is left.
func (s Store) Create(m Meta) (err error) {
	if m.SizeBytes < MinBytes {
		return fmt.Errorf("volume: %d bytes is below the minimum of %d", m.SizeBytes, MinBytes)
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return fmt.Errorf("volume: %w", err)
	}
	if err := os.Mkdir(s.dir(m.ID), 0o700); err != nil {
		return fmt.Errorf("volume: %w", err)
	}
	defer func() {
		if err != nil {
			s.Remove(m.ID, false)
		}
	}()
	if err := os.Mkdir(s.MountPoint(m.ID), 0o700); err != nil {
		return fmt.Errorf("volume: %w", err)
	}
	f, err := os.OpenFile(s.image(m.ID), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("volume: %w", err)
	}
	err = f.Truncate(m.SizeBytes)
	f.Close()
	if err != nil {
		return fmt.Errorf("volume: size image: %w", err)
	}
	// As internal/disk: no reserved blocks, lazy tables; the root
	// directory is the volume block's root from the start.
	owner := fmt.Sprintf("root_owner=%d:%d", m.HostUID, m.HostUID)
	out, err := exec.Command("mkfs.ext4", "-q", "-F", "-m", "0", "-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard,"+owner, s.image(m.ID)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("volume: mkfs.ext4 (package e2fsprogs): %v: %s", err, strings.TrimSpace(string(out)))
	}
	if err := s.Mount(m.ID); err != nil {
		return err
	}
	os.Remove(filepath.Join(s.MountPoint(m.ID), "lost+found"))
	return s.finish(m)
}

// finish mounts a made volume if it is not, and writes its meta.json,
// last.
func (s Store) finish(m Meta) error {
	if err := s.EnsureMounted(m.ID); err != nil {
		return err
	}
	b, _ := json.Marshal(m)
	tmp := s.meta(m.ID) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("volume: %w", err)
	}
	if err := os.Rename(tmp, s.meta(m.ID)); err != nil {
		return fmt.Errorf("volume: %w", err)
	}
	return nil
}

// Mounted reports whether the volume's filesystem is mounted on the host.
func (s Store) Mounted(id string) (bool, error) {
	var dir, parent unix.Stat_t
	if err := unix.Stat(s.MountPoint(id), &dir); err != nil {
		return false, err
	}
	if err := unix.Stat(s.dir(id), &parent); err != nil {
		return false, err
	}
	return dir.Dev != parent.Dev, nil
}

// Mount loop-mounts the image at MountPoint. nodev and nosuid: nothing on
// it is a device or a setuid program, for the host or a sandbox (bind
// mounts keep these flags).
func (s Store) Mount(id string) error {
	m := mount.Mount{Type: "ext4", Source: s.image(id), Options: []string{"loop", "discard", "nodev", "nosuid", "noatime"}}
	if err := m.Mount(s.MountPoint(id)); err != nil {
		return fmt.Errorf("volume: mount %s: %w", s.image(id), err)
	}
	return nil
}

// EnsureMounted mounts the volume if it is not (the host restarted).
func (s Store) EnsureMounted(id string) error {
	ok, err := s.Mounted(id)
	if err != nil {
		return fmt.Errorf("volume: %w", err)
	}
	if ok {
		s.thaw(id) // a boxd killed during a snapshot left it frozen
		return nil
	}
	return s.Mount(id)
}

// ext4's EXT4_IOC_SHUTDOWN (_IOR('X', 125, __u32)) and its flag that
// skips flushing the journal: the filesystem is being deleted.
const (
	ext4IocShutdown  = 0x8004587d
	ext4GoingNoFlush = 2
)

// Remove deletes the volume. shutdown first stops the filesystem, so the
// sandboxes that still mount it (their mount namespaces keep it alive)
// get EIO for any I/O there from then on. The host mount is detached
// lazily; the loop device goes with the last mount.
func (s Store) Remove(id string, shutdown bool) error {
	mp := s.MountPoint(id)
	if ok, err := s.Mounted(id); err == nil && ok {
		if shutdown {
			if err := shutdownFS(mp); err != nil {
				return err
			}
		}
		if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
			return fmt.Errorf("volume: unmount %s: %w", mp, err)
		}
	}
	if err := os.RemoveAll(s.dir(id)); err != nil {
		return fmt.Errorf("volume: %w", err)
	}
	return nil
}

func shutdownFS(mp string) error {
	fd, err := unix.Open(mp, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("volume: open %s: %w", mp, err)
	}
	defer unix.Close(fd)
	flag := uint32(ext4GoingNoFlush)
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), ext4IocShutdown, uintptr(unsafe.Pointer(&flag))); e != 0 {
		return fmt.Errorf("volume: shut down %s: %w", mp, e)
	}
	return nil
}

// Usage is the bytes in use on the volume's filesystem.
func (s Store) Usage(id string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(s.MountPoint(id), &st); err != nil {
		return 0, fmt.Errorf("volume: statfs: %w", err)
	}
	return int64(st.Blocks-st.Bfree) * st.Bsize, nil
}

// Load reads every volume, mounting any the host lost (a reboot), and
// removes what a create that did not finish left. A volume that cannot be
// read or mounted is reported in errs and left alone.
func (s Store) Load() (metas []Meta, errs []error) {
	ents, err := os.ReadDir(s.Dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, []error{fmt.Errorf("volume: %w", err)}
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		id := e.Name()
		b, err := os.ReadFile(s.meta(id))
		if errors.Is(err, os.ErrNotExist) {
			if err := s.Remove(id, false); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		var m Meta
		if err == nil {
			err = json.Unmarshal(b, &m)
		}
		if err == nil {
			err = s.EnsureMounted(id)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("volume %s: %w", id, err))
			continue
		}
		metas = append(metas, m)
	}
	return metas, errs
}
