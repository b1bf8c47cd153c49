//go:build linux

package safetar

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// maxDeferredDirs bounds the directories whose final mode is applied at the
// end (those without owner rwx, which would block creating their contents).
// Past it, modes are applied at once: memory stays bounded for hostile
// archives, at worst a non-root extraction then fails on a read-only dir.
const maxDeferredDirs = 10000

// Extract extracts the tar stream r into destDir, which must exist. If rename
// is not empty it replaces the top-level name of every entry, so an archive
// of "src/..." extracts as "rename/...". See the package comment for what is
// refused. Errors name the offending entry.
func Extract(r io.Reader, destDir, rename string) error {
	if rename != "" {
		if err := checkComponent(rename); err != nil {
			return err
		}
	}
	root, err := unix.Open(destDir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("safetar: open destination %s: %w", destDir, err)
	}
	defer unix.Close(root)
	x := &extractor{root: root, rename: rename}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("safetar: read archive: %w", err)
		}
		if err := x.entry(hdr, tr); err != nil {
			return fmt.Errorf("safetar: entry %q: %w", shorten(hdr.Name), err)
		}
	}
	return x.finish()
}

type extractor struct {
	root   int
	rename string
	top    string // the archive's top-level name, from its first entry
	dirs   []deferredDir
}

type deferredDir struct {
	comps []string
	perm  uint32
}

// target validates an entry name and maps it to components under destDir.
// nil, nil means an entry for the archive root itself ("./"), skipped.
func (x *extractor) target(name string) ([]string, error) {
	comps, err := splitName(name)
	if err != nil || len(comps) == 0 {
		return nil, err
	}
	if x.top == "" {
		x.top = comps[0]
	} else if comps[0] != x.top {
		return nil, unsafef("second top-level name %q (first was %q)", comps[0], x.top)
	}
	if x.rename != "" {
		comps[0] = x.rename
	}
	return comps, nil
}

func (x *extractor) entry(hdr *tar.Header, data io.Reader) error {
	for k := range hdr.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return unsafef("sparse files are not supported")
		}
	}
	switch hdr.Typeflag {
	case tar.TypeXGlobalHeader, tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		return nil // documented as skipped
	case tar.TypeReg, tar.TypeDir, tar.TypeSymlink, tar.TypeLink:
	default:
		return unsafef("unsupported entry type %q", hdr.Typeflag)
	}
	comps, err := x.target(hdr.Name)
	if err != nil || comps == nil {
		return err
	}
	parent, err := openDir(x.root, comps[:len(comps)-1], true)
	if err != nil {
		return err
	}
	if parent != x.root {
		defer unix.Close(parent)
	}
	base := comps[len(comps)-1]
	switch hdr.Typeflag {
	case tar.TypeReg:
		return x.file(parent, base, hdr, data)
	case tar.TypeDir:
		return x.dir(parent, base, comps, hdr)
	case tar.TypeSymlink:
		return x.symlink(parent, base, hdr)
	default:
		return x.link(parent, base, hdr)
	}
}

// file writes a regular file under a temporary name in parent and renames
// it over base at the end, so a copy that fails (a full disk, a vanished
// client) neither leaves a partial file behind nor loses the file it was
// to replace. The rename replaces a symlink at base, never what it points
// to.
func (x *extractor) file(parent int, base string, hdr *tar.Header, data io.Reader) (err error) {
	if err := notADir(parent, base); err != nil {
		return err
	}
	tmp, fd, err := createTemp(parent, base)
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	f := os.NewFile(uintptr(fd), base)
	defer f.Close()
	defer func() {
		if err != nil {
			_ = unix.Unlinkat(parent, tmp, 0)
		}
	}()
	buf := copyBufs.Get().(*[copyBuf]byte)
	defer copyBufs.Put(buf)
	// Hiding f's ReadFrom makes the copy use buf: os.File's fallback
	// would write 32 KiB at a time.
	if _, err := io.CopyBuffer(struct{ io.Writer }{f}, data, buf[:]); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	// Exact bits regardless of umask; setuid/setgid never survive.
	if err := unix.Fchmod(fd, uint32(hdr.Mode)&0o777); err != nil {
		return fmt.Errorf("chmod: %w", err)
	}
	futimens(fd, hdr.ModTime) // best effort: a wrong mtime is not worth failing for
	if err := f.Close(); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	if err := unix.Renameat(parent, tmp, parent, base); err != nil {
		if err == unix.EISDIR || err == unix.ENOTEMPTY || err == unix.EEXIST {
			return fmt.Errorf("%w: a directory is in the way", fs.ErrExist)
		}
		return fmt.Errorf("rename into place: %w", err)
	}
	return nil
}

// notADir fails early, before any data is written, if base is a directory
// (the rename would refuse it anyway).
func notADir(parent int, base string) error {
	var st unix.Stat_t
	err := unix.Fstatat(parent, base, &st, unix.AT_SYMLINK_NOFOLLOW)
	if err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return fmt.Errorf("%w: a directory is in the way", fs.ErrExist)
	}
	return nil
}

// createTemp creates an empty file, mode 0600, under a new hidden name next
// to base.
func createTemp(parent int, base string) (string, int, error) {
	// O_EXCL makes a clash harmless; the randomness only makes it rare.
	for range 10 {
		suffix := ".boxd-" + strconv.FormatUint(rand.Uint64(), 36)
		name := "." + base + suffix
		if len(name) > 255 {
			name = suffix
		}
		fd, err := unix.Openat(parent, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != unix.EEXIST {
			return name, fd, err
		}
	}
	return "", -1, unix.EEXIST
}

func (x *extractor) dir(parent int, base string, comps []string, hdr *tar.Header) error {
	perm := uint32(hdr.Mode) & 0o777
	if hdr.Mode&0o1000 != 0 {
		perm |= unix.S_ISVTX
	}
	if err := unix.Mkdirat(parent, base, 0o700); err != nil && err != unix.EEXIST {
		return fmt.Errorf("mkdir: %w", err)
	}
	fd, err := openNoFollowDir(parent, base)
	switch {
	case err == unix.ELOOP || err == unix.ENOTDIR && isSymlink(parent, base):
		return unsafef("a symlink is in the way of the directory")
	case err == unix.ENOTDIR:
		return fmt.Errorf("%w: a non-directory is in the way", fs.ErrExist)
	case err != nil:
		return fmt.Errorf("open directory: %w", err)
	}
	defer unix.Close(fd)
	now := perm
	if perm&0o700 != 0o700 && len(x.dirs) < maxDeferredDirs {
		// Keep it writable until the end so its contents can be created.
		now |= 0o700
		x.dirs = append(x.dirs, deferredDir{comps: comps, perm: perm})
	}
	if err := unix.Fchmod(fd, now); err != nil {
		return fmt.Errorf("chmod: %w", err)
	}
	return nil
}

func (x *extractor) symlink(parent int, base string, hdr *tar.Header) error {
	t := hdr.Linkname
	switch {
	case t == "":
		return unsafef("empty symlink target")
	case len(t) > MaxNameLen:
		return unsafef("symlink target longer than %d bytes", MaxNameLen)
	case strings.IndexByte(t, 0) >= 0:
		return unsafef("symlink target contains NUL")
	}
	// Any target is allowed: the link is created, never followed here.
	_, err := retryExisting(parent, base, func() (int, error) {
		return -1, unix.Symlinkat(t, parent, base)
	})
	if err != nil {
		return fmt.Errorf("symlink: %w", err)
	}
	return nil
}

func (x *extractor) link(parent int, base string, hdr *tar.Header) error {
	// The target is an entry name like any other: same top-level, same rename.
	tcomps, err := x.target(hdr.Linkname)
	if err != nil {
		return fmt.Errorf("hard link target: %w", err)
	}
	if tcomps == nil {
		return unsafef("hard link to the archive root")
	}
	oldDir, err := openDir(x.root, tcomps[:len(tcomps)-1], false)
	if err != nil {
		return fmt.Errorf("hard link target: %w", err)
	}
	if oldDir != x.root {
		defer unix.Close(oldDir)
	}
	// Flags 0: if the target is a symlink, link the symlink, not its target.
	_, err = retryExisting(parent, base, func() (int, error) {
		return -1, unix.Linkat(oldDir, tcomps[len(tcomps)-1], parent, base, 0)
	})
	if err != nil {
		return fmt.Errorf("hard link: %w", err)
	}
	return nil
}

// retryExisting runs create; if the name is taken by a file or symlink it is
// removed (so the new entry replaces it instead of writing through it) and
// create runs once more. Existing directories are left alone and reported.
func retryExisting(parent int, base string, create func() (int, error)) (int, error) {
	fd, err := create()
	if err != unix.EEXIST {
		return fd, err
	}
	var st unix.Stat_t
	if err := unix.Fstatat(parent, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return -1, err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return -1, fmt.Errorf("%w: a directory is in the way", fs.ErrExist)
	}
	if err := unix.Unlinkat(parent, base, 0); err != nil && err != unix.ENOENT {
		return -1, fmt.Errorf("replace existing: %w", err)
	}
	return create()
}

// finish applies the directory modes that were held back, deepest first.
func (x *extractor) finish() error {
	var errs []error
	for i := len(x.dirs) - 1; i >= 0; i-- {
		d := x.dirs[i]
		fd, err := openDir(x.root, d.comps, false)
		if err == nil {
			err = unix.Fchmod(fd, d.perm)
			unix.Close(fd)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("safetar: set mode of %q: %w", strings.Join(d.comps, "/"), err))
		}
	}
	return errors.Join(errs...)
}

// futimens sets a file's times through its descriptor: utimensat with a NULL
// path, which x/sys/unix does not expose (its Futimes goes through /proc,
// which a sandbox may not have).
func futimens(fd int, t time.Time) error {
	ts := [2]unix.Timespec{unix.NsecToTimespec(t.UnixNano()), unix.NsecToTimespec(t.UnixNano())}
	_, _, errno := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}
