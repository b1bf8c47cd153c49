//go:build linux

package layerdiff

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"unsafe"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"
)

// MaxCopyDepth bounds how deep CopyUpper descends. Each level holds two
// open directories; a tar path (what a commit writes) stops at PATH_MAX,
// about 2048 levels, so nothing a commit can hold is refused here.
const MaxCopyDepth = 2048

// opaqueXattr marks an overlay directory that hides the layers under it.
// Only the kernel (as the mounter) sets trusted.* names: sandbox root
// cannot, so the value in an upperdir is the kernel's own.
const opaqueXattr = "trusted.overlay.opaque"

// CopyOptions change what CopyUpper writes.
type CopyOptions struct {
	// TarTimes writes times as a layer tar carries them (containerd's
	// differ and applier): modification times cut to whole seconds and
	// access time equal to it, so the copy is what unpacking the commit's
	// tar gives.
	TarTimes bool
}

// CopyStats says what CopyUpper copied.
type CopyStats struct {
	Entries int
	Bytes   int64 // file data (holes not counted)
}

// CopyUpper copies the overlay upperdir src into dst, the empty upperdir of
// a new snapshot on the same parent layers, so that dst over those layers
// shows what src over them showed: files, directories, symlinks, FIFOs
// and hard links within the layer, overlay whiteouts (0/0 character
// devices) and opaque directories as they are. It is what a fork needs,
// without writing and reading a tar: file data is copied by the kernel
// (copy_file_range), holes are kept (a sparse file stays sparse).
//
// What is kept matches what a commit's layer tar keeps (WriteDiff, then
// Apply): ownership unshifted by shift (ids outside it become the overflow
// id), modes with setuid, setgid and sticky bits, modification times, and
// of the extended attributes security.capability (made namespace-free as
// in Rewrite) and the overlay opaque mark; other xattrs are dropped and
// sockets left out. A device node other than a whiteout cannot be made in
// a user namespace, so one found is refused rather than recreated by host
// root.
//
// src is read beneath itself only (no symlink is followed, openat2
// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS), so sandbox root cannot redirect
// the copy even if src changed meanwhile; the caller keeps it still (the
// sandbox is frozen) for a consistent copy. dst must be empty and only
// boxd's. On error dst holds a partial copy the caller removes with its
// snapshot.
func CopyUpper(ctx context.Context, dst, src string, shift Shift, opts CopyOptions) (CopyStats, error) {
	sfd, err := unix.Open(src, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return CopyStats{}, fmt.Errorf("copy layer: open %s: %w", src, err)
	}
	defer unix.Close(sfd)
	dfd, err := unix.Open(dst, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return CopyStats{}, fmt.Errorf("copy layer: open %s: %w", dst, err)
	}
	defer unix.Close(dfd)
	c := &copier{ctx: ctx, shift: shift, opts: opts, dstRoot: dfd, links: map[inode]string{}, buf: make([]byte, 1<<20)}
	if err := c.dir(sfd, dfd, "", 0); err != nil {
		return c.stats, fmt.Errorf("copy layer %s: %w", src, err)
	}
	return c.stats, nil
}

type inode struct{ dev, ino uint64 }

type copier struct {
	ctx     context.Context
	shift   Shift
	opts    CopyOptions
	dstRoot int
	links   map[inode]string // a hard-linked file's first copy, relative to dst
	buf     []byte           // for copies copy_file_range cannot make
	stats   CopyStats
}

// dir copies the entries of the directory sfd into dfd; rel names it
// (relative to the roots) for errors and hard links.
func (c *copier) dir(sfd, dfd int, rel string, depth int) error {
	if depth >= MaxCopyDepth {
		return fmt.Errorf("%s: directories nested deeper than %d levels: %w", rel, MaxCopyDepth, errdefs.ErrFailedPrecondition)
	}
	if err := c.ctx.Err(); err != nil {
		return err
	}
	names, err := readNames(sfd)
	if err != nil {
		return fmt.Errorf("%s: read directory: %w", orRoot(rel), err)
	}
	for _, name := range names {
		if err := c.entry(sfd, dfd, name, path.Join(rel, name), depth); err != nil {
			return err
		}
	}
	return nil
}

func orRoot(rel string) string {
	if rel == "" {
		return "/"
	}
	return rel
}

// readNames lists a directory by its descriptor (a dup, so sfd stays
// open at its position for the caller).
func readNames(sfd int) ([]string, error) {
	fd, err := unix.Openat(sfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), ".")
	defer f.Close()
	return f.Readdirnames(-1)
}

func (c *copier) entry(sfd, dfd int, name, rel string, depth int) error {
	var st unix.Stat_t
	if err := unix.Fstatat(sfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFSOCK {
		return nil // a tar cannot hold a socket; neither does a commit
	}
	c.stats.Entries++
	uid, gid := c.shift.uid(int(st.Uid)), c.shift.gid(int(st.Gid))
	perm := st.Mode & 0o7777
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		if err := unix.Mkdirat(dfd, name, 0o700); err != nil {
			return fmt.Errorf("%s: mkdir: %w", rel, err)
		}
		csfd, err := openBeneath(sfd, name, unix.O_RDONLY|unix.O_DIRECTORY)
		if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		defer unix.Close(csfd)
		cdfd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		defer unix.Close(cdfd)
		if err := c.dir(csfd, cdfd, rel, depth+1); err != nil {
			return err
		}
		if v, err := getxattr(csfd, opaqueXattr); err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		} else if v != nil {
			if err := unix.Fsetxattr(cdfd, opaqueXattr, v, 0); err != nil {
				return fmt.Errorf("%s: mark opaque: %w", rel, err)
			}
		}
		// The owner first: chown clears setuid and setgid bits.
		if err := unix.Fchown(cdfd, uid, gid); err != nil {
			return fmt.Errorf("%s: chown: %w", rel, err)
		}
		if err := unix.Fchmod(cdfd, perm); err != nil {
			return fmt.Errorf("%s: chmod: %w", rel, err)
		}
		return c.futimes(cdfd, &st, rel)
	case unix.S_IFREG:
		if st.Nlink > 1 {
			key := inode{uint64(st.Dev), st.Ino}
			if first, ok := c.links[key]; ok {
				if err := unix.Linkat(c.dstRoot, first, dfd, name, 0); err != nil {
					return fmt.Errorf("%s: link to %s: %w", rel, first, err)
				}
				return nil
			}
			c.links[key] = rel
		}
		return c.file(sfd, dfd, name, rel, &st, uid, gid, perm)
	case unix.S_IFLNK:
		target, err := readlinkat(sfd, name, int(st.Size))
		if err != nil {
			return fmt.Errorf("%s: readlink: %w", rel, err)
		}
		if err := unix.Symlinkat(target, dfd, name); err != nil {
			return fmt.Errorf("%s: symlink: %w", rel, err)
		}
	case unix.S_IFCHR:
		if st.Rdev != 0 {
			return fmt.Errorf("%s: a character device %d:%d (only overlay whiteouts, 0:0, can be made in a sandbox): %w", rel, unix.Major(st.Rdev), unix.Minor(st.Rdev), errdefs.ErrFailedPrecondition)
		}
		if err := unix.Mknodat(dfd, name, unix.S_IFCHR|0o600, 0); err != nil {
			return fmt.Errorf("%s: whiteout: %w", rel, err)
		}
	case unix.S_IFIFO:
		if err := unix.Mknodat(dfd, name, unix.S_IFIFO|0o600, 0); err != nil {
			return fmt.Errorf("%s: mkfifo: %w", rel, err)
		}
	default:
		return fmt.Errorf("%s: a device node (mode %o) cannot be made in a sandbox: %w", rel, st.Mode, errdefs.ErrFailedPrecondition)
	}
	// Symlinks, whiteouts and FIFOs: by name, without following.
	if err := unix.Fchownat(dfd, name, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("%s: chown: %w", rel, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFLNK {
		if err := unix.Fchmodat(dfd, name, perm, 0); err != nil {
			return fmt.Errorf("%s: chmod: %w", rel, err)
		}
	}
	ts := c.times(&st)
	if err := unix.UtimesNanoAt(dfd, name, ts[:], unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("%s: times: %w", rel, err)
	}
	return nil
}

// file copies a regular file's data (holes kept), owner, mode, file
// capability and times.
func (c *copier) file(sfd, dfd int, name, rel string, st *unix.Stat_t, uid, gid int, perm uint32) error {
	in, err := openBeneath(sfd, name, unix.O_RDONLY)
	if err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	defer unix.Close(in)
	out, err := unix.Openat(dfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("%s: create: %w", rel, err)
	}
	defer unix.Close(out)
	if err := c.data(in, out, st.Size); err != nil {
		return fmt.Errorf("%s: copy: %w", rel, err)
	}
	if err := unix.Fchown(out, uid, gid); err != nil {
		return fmt.Errorf("%s: chown: %w", rel, err)
	}
	// The capability before the mode: setting it clears setuid.
	if v, err := getxattr(in, "security.capability"); err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	} else if v != nil {
		if cv, keep := unshiftCap(v, c.shift); keep {
			if err := unix.Fsetxattr(out, "security.capability", cv, 0); err != nil {
				return fmt.Errorf("%s: set capability: %w", rel, err)
			}
		}
	}
	if err := unix.Fchmod(out, perm); err != nil {
		return fmt.Errorf("%s: chmod: %w", rel, err)
	}
	return c.futimes(out, st, rel)
}

// data copies size bytes of in to out, the data segments only (SEEK_DATA,
// SEEK_HOLE), by copy_file_range where the kernel can (same filesystem)
// and by read and write where it cannot (a sandbox's disk-capped layer is
// a filesystem of its own).
func (c *copier) data(in, out int, size int64) error {
	if err := unix.Ftruncate(out, size); err != nil {
		return err
	}
	for off := int64(0); off < size; {
		start, err := unix.Seek(in, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // only a hole is left
		}
		if err != nil {
			return fmt.Errorf("seek data: %w", err)
		}
		end, err := unix.Seek(in, start, unix.SEEK_HOLE)
		if err != nil {
			return fmt.Errorf("seek hole: %w", err)
		}
		end = min(end, size)
		if err := c.segment(in, out, start, end); err != nil {
			return err
		}
		c.stats.Bytes += end - start
		off = end
	}
	return nil
}

func (c *copier) segment(in, out int, start, end int64) error {
	for start < end {
		if err := c.ctx.Err(); err != nil {
			return err
		}
		ro, wo := start, start
		n, err := unix.CopyFileRange(in, &ro, out, &wo, int(min(end-start, 1<<30)), 0)
		switch {
		case err == nil && n > 0:
			start += int64(n)
			continue
		case err == nil: // the file shrank under the copy
			return io.ErrUnexpectedEOF
		case errors.Is(err, unix.EXDEV), errors.Is(err, unix.EINVAL), errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOSYS):
		default:
			return err
		}
		// copy_file_range refused this pair of files: read and write.
		k := int(min(end-start, int64(len(c.buf))))
		r, err := unix.Pread(in, c.buf[:k], start)
		if err != nil {
			return err
		}
		if r == 0 {
			return io.ErrUnexpectedEOF
		}
		for w := 0; w < r; {
			n, err := unix.Pwrite(out, c.buf[w:r], start+int64(w))
			if err != nil {
				return err
			}
			w += n
		}
		start += int64(r)
	}
	return nil
}

// openBeneath opens name in the directory dirfd without following any
// symlink (name is one component, so the only one would be name itself).
func openBeneath(dirfd int, name string, flags int) (int, error) {
	fd, err := unix.Openat2(dirfd, name, &unix.OpenHow{
		Flags:   uint64(flags | unix.O_NOFOLLOW | unix.O_CLOEXEC),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return -1, fmt.Errorf("open: %w", err)
	}
	return fd, nil
}

// getxattr reads one extended attribute of an open file; nil when it has
// none of that name.
func getxattr(fd int, name string) ([]byte, error) {
	buf := make([]byte, 256)
	for {
		n, err := unix.Fgetxattr(fd, name, buf)
		switch {
		case errors.Is(err, unix.ENODATA), errors.Is(err, unix.ENOTSUP):
			return nil, nil
		case errors.Is(err, unix.ERANGE) && len(buf) < 64<<10:
			buf = make([]byte, 64<<10)
			continue
		case err != nil:
			return nil, fmt.Errorf("read xattr %s: %w", name, err)
		}
		return buf[:n], nil
	}
}

func readlinkat(dirfd int, name string, size int) (string, error) {
	buf := make([]byte, max(size+1, 256))
	for {
		n, err := unix.Readlinkat(dirfd, name, buf)
		if err != nil {
			return "", err
		}
		if n < len(buf) {
			return string(buf[:n]), nil
		}
		if len(buf) >= unix.PathMax {
			return "", unix.ENAMETOOLONG
		}
		buf = make([]byte, unix.PathMax)
	}
}

// times are the access and modification times to give a copy of st.
func (c *copier) times(st *unix.Stat_t) [2]unix.Timespec {
	if c.opts.TarTimes {
		m := unix.Timespec{Sec: st.Mtim.Sec}
		return [2]unix.Timespec{m, m}
	}
	return [2]unix.Timespec{st.Atim, st.Mtim}
}

func (c *copier) futimes(fd int, st *unix.Stat_t, rel string) error {
	// futimens(3): utimensat on the descriptor itself, with a NULL path.
	ts := c.times(st)
	if _, _, e := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0); e != 0 {
		return fmt.Errorf("%s: times: %w", rel, e)
	}
	return nil
}
