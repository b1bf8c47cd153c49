package volume

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// Snapshots and clones are copies of a volume's image: this host's
// filesystems (ext4) have no reflinks, so a copy costs the blocks the
// volume really uses, not its size. The copy skips holes (SEEK_DATA and
// SEEK_HOLE) and moves the data in the kernel (copy_file_range), so the
// result is as sparse as the source; a live volume's filesystem is frozen
// (FIFREEZE) meanwhile, so the copy is consistent: its writers wait.

// FIFREEZE and FITHAW: _IOWR('X', 119, int) and _IOWR('X', 120, int).
const (
	fiFreeze = 0xc0045877
	fiThaw   = 0xc0045878
)

func (s Store) snapDir(id string) string { return filepath.Join(s.dir(id), "snapshots") }

// SnapshotPath is the image of a volume's snapshot.
func (s Store) SnapshotPath(id, snap string) string {
	return filepath.Join(s.snapDir(id), snap+".ext4")
}

// Snapshots lists a volume's snapshots by name.
func (s Store) Snapshots(id string) []string {
	ents, _ := os.ReadDir(s.snapDir(id))
	var out []string
	for _, e := range ents {
		if n, ok := strings.CutSuffix(e.Name(), ".ext4"); ok && e.Type().IsRegular() {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// freeze stops writes to a mounted volume until the returned thaw.
func (s Store) freeze(id string) (thaw func(), _ error) {
	fd, err := unix.Open(s.MountPoint(id), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("volume: open: %w", err)
	}
	if err := unix.IoctlSetInt(fd, fiFreeze, 0); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("volume: freeze: %w", err)
	}
	return func() {
		_ = unix.IoctlSetInt(fd, fiThaw, 0)
		unix.Close(fd)
	}, nil
}

// thaw undoes a freeze a killed boxd left (not frozen is no error).
func (s Store) thaw(id string) {
	fd, err := unix.Open(s.MountPoint(id), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == nil {
		_ = unix.IoctlSetInt(fd, fiThaw, 0)
		unix.Close(fd)
	}
}

// Snapshot copies the volume's image, frozen, to its snapshot snap.
func (s Store) Snapshot(id, snap string) error {
	if err := os.MkdirAll(s.snapDir(id), 0o700); err != nil {
		return fmt.Errorf("volume: %w", err)
	}
	dst := s.SnapshotPath(id, snap)
	if _, err := os.Lstat(dst); err == nil {
		return fmt.Errorf("volume: snapshot %q: %w", snap, os.ErrExist)
	}
	thaw, err := s.freeze(id)
	if err != nil {
		return err
	}
	defer thaw()
	if err := copySparse(s.image(id), dst+".tmp"); err != nil {
		return err
	}
	if err := os.Rename(dst+".tmp", dst); err != nil {
		os.Remove(dst + ".tmp")
		return fmt.Errorf("volume: %w", err)
	}
	return nil
}

// CreateFrom makes volume m a copy of volume srcID (live, frozen while
// copied) or, if snap is set, of its snapshot snap. m.HostUID must be the
// source's: the copied files keep their owners.
func (s Store) CreateFrom(m Meta, srcID, snap string) (err error) {
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
	src := s.SnapshotPath(srcID, snap)
	if snap == "" {
		src = s.image(srcID)
		thaw, err := s.freeze(srcID)
		if err != nil {
			return err
		}
		defer thaw()
	}
	if err := copySparse(src, s.image(m.ID)); err != nil {
		return err
	}
	return s.finish(m)
}

// copySparse copies src to a new file dst, its data only: holes stay
// holes.
func copySparse(src, dst string) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("volume: %w", err)
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return fmt.Errorf("volume: %w", err)
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("volume: %w", err)
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(dst)
		}
	}()
	if err := out.Truncate(st.Size()); err != nil {
		return fmt.Errorf("volume: %w", err)
	}
	rfd, wfd := int(in.Fd()), int(out.Fd())
	for pos := int64(0); pos < st.Size(); {
		start, err := unix.Seek(rfd, pos, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // only a hole is left
		}
		if err != nil {
			return fmt.Errorf("volume: seek data: %w", err)
		}
		end, err := unix.Seek(rfd, start, unix.SEEK_HOLE)
		if err != nil {
			return fmt.Errorf("volume: seek hole: %w", err)
		}
		for off := start; off < end; {
			roff, woff := off, off
			n, err := unix.CopyFileRange(rfd, &roff, wfd, &woff, int(end-off), 0)
			if err != nil {
				return fmt.Errorf("volume: copy: %w", err)
			}
			if n == 0 {
				return fmt.Errorf("volume: copy: %w", io.ErrUnexpectedEOF)
			}
			off += int64(n)
		}
		pos = end
	}
	return out.Sync()
}
