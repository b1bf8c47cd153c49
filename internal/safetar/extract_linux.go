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
	"path/filepath"
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

// Extract extracts the tar stream r into destDir, which must exist, as opts
// says. See the package comment for what is refused. Errors name the
// offending entry. On error, a top-level directory this call created is
// removed again; entries already written into a top-level directory that
// existed before stay.
func Extract(r io.Reader, destDir string, opts Options) (err error) {
	x, err := NewExtractor(destDir, opts)
	if err != nil {
		return err
	}
	defer func() { err = x.Close(err) }()
	if err := ReadEntries(r, x.Entry); err != nil {
		return err
	}
	return x.Finish()
}

// ReadEntries reads the tar stream r up to its end-of-archive marker and
// hands each entry to entry, with a reader of its data (unread data is
// skipped). It stops at the first error; entry's are returned as they
// are, the archive's own name the archive. This is the tar reader of
// Extract and of boxd-init's copy-in, whatever places the entries.
func ReadEntries(r io.Reader, entry func(hdr *tar.Header, data io.Reader) error) error {
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("safetar: read archive: %w", err)
		}
		if err := entry(hdr, tr); err != nil {
			return err
		}
	}
}

// Extractor places one archive's entries in a directory, as Extract does,
// for a caller that reads the archive itself (see ReadEntries). Call
// Entry for each entry in order, then Finish, and always Close.
type Extractor struct {
	x *extractor
}

// NewExtractor opens destDir, which must exist, for an extraction as opts
// says.
func NewExtractor(destDir string, opts Options) (*Extractor, error) {
	for _, n := range []string{opts.Top, opts.Rename} {
		if n != "" {
			if err := checkComponent(n); err != nil {
				return nil, err
			}
		}
	}
	root, err := unix.Open(destDir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("safetar: open destination %s: %w", destDir, err)
	}
	return &Extractor{x: &extractor{root: root, destDir: destDir, opts: opts, top: opts.Top, parentFD: -1}}, nil
}

// Entry places one entry; its error names the entry.
func (e *Extractor) Entry(hdr *tar.Header, data io.Reader) error {
	if err := e.x.entry(hdr, data); err != nil {
		return fmt.Errorf("safetar: entry %q: %w", shorten(hdr.Name), err)
	}
	return nil
}

// Finish applies what waits for the archive's end: the modes of
// directories held writable, and the move of a staged top-level directory
// into place.
func (e *Extractor) Finish() error { return e.x.finish() }

// Close releases the extraction and returns err; if err is not nil, a
// top-level directory the extraction created is removed again, and a
// failure to remove it is joined to err.
func (e *Extractor) Close(err error) error {
	e.x.dropParent()
	if err != nil {
		err = errors.Join(err, e.x.abandon())
	}
	unix.Close(e.x.root)
	return err
}

type extractor struct {
	root    int
	destDir string
	opts    Options
	top     string // the archive's top-level name: opts.Top, or the first entry's
	// hostTop is what the top-level name maps to in destDir, set by the
	// first entry: opts.Rename (or top), or stage while a new top-level
	// directory is built under a temporary name.
	hostTop string
	// stage is the temporary name of a top-level directory this call
	// creates; finish renames it into place, abandon removes it.
	stage     string
	stagePerm uint32 // the mode the staged directory gets at the end
	dirs      []deferredDir
	// written records, when extracting into a directory that existed
	// before, the non-directory entries this call wrote, so hard links can
	// only point at those (a staged directory holds nothing else anyway).
	written      map[string]struct{}
	writtenBytes int
	// parentFD is the last entry's parent directory (parentKey its
	// components), kept open because a tar lists a directory's entries
	// one after another: one open per directory instead of one per file.
	// Entries can never replace a directory (see retryExisting, notADir),
	// so the descriptor stays the directory the name led to.
	parentFD  int
	parentKey string
}

// parent opens the directory comps (made if missing), or returns the one
// the previous entry used. The caller does not close it.
func (x *extractor) parent(comps []string) (int, error) {
	if len(comps) == 0 {
		return x.root, nil
	}
	key := strings.Join(comps, "/")
	if x.parentFD >= 0 && key == x.parentKey {
		return x.parentFD, nil
	}
	x.dropParent()
	fd, err := openDir(x.root, comps, true)
	if err != nil {
		return -1, err
	}
	x.parentFD, x.parentKey = fd, key
	return fd, nil
}

// dropParent closes the kept parent directory.
func (x *extractor) dropParent() {
	if x.parentFD >= 0 {
		unix.Close(x.parentFD)
		x.parentFD, x.parentKey = -1, ""
	}
}

type deferredDir struct {
	comps []string
	perm  uint32
}

// maxWrittenBytes bounds the names kept in extractor.written; past it hard
// links to later entries are refused rather than memory growing with a
// hostile archive.
const maxWrittenBytes = 16 << 20

// target validates an entry name and returns its components, the first
// still the archive's top-level name. nil, nil means an entry for the
// archive root itself ("./"), skipped unless opts.Top is set.
func (x *extractor) target(name string) ([]string, error) {
	comps, err := splitName(name)
	if err != nil {
		return nil, err
	}
	switch {
	case len(comps) == 0 && x.opts.Top != "":
		return nil, unsafef("the archive root is not under %q, the name asked for", x.top)
	case len(comps) == 0:
		return nil, nil
	case x.top == "":
		x.top = comps[0]
	case comps[0] != x.top && x.opts.Top != "":
		return nil, unsafef("not under %q, the name asked for", x.top)
	case comps[0] != x.top:
		return nil, unsafef("second top-level name %q (first was %q)", comps[0], x.top)
	}
	return comps, nil
}

// place decides, at the first entry, where the top-level name goes: if it
// will be a directory that does not exist yet, it is built under a hidden
// temporary name and renamed into place at the end, so a refused archive
// leaves nothing behind; otherwise entries go straight to their names.
func (x *extractor) place(typ byte, comps []string) error {
	name := x.name()
	x.hostTop = name
	if typ != tar.TypeDir && len(comps) == 1 {
		return nil // a single file, link or symlink: written in one step
	}
	var st unix.Stat_t
	if err := unix.Fstatat(x.root, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != unix.ENOENT {
		return nil // there is something: the entries say what to do with it
	}
	stage, err := mkdirTemp(x.root, name)
	if err != nil {
		return fmt.Errorf("create %s: %w", name, err)
	}
	x.hostTop, x.stage, x.stagePerm = stage, stage, 0o755
	return nil
}

// name is the top-level name in destDir once the extraction is done.
func (x *extractor) name() string {
	if x.opts.Rename != "" {
		return x.opts.Rename
	}
	return x.top
}

// mkdirTemp creates an empty directory, mode 0700, under a new hidden name
// next to base.
func mkdirTemp(parent int, base string) (string, error) {
	for range 10 {
		name := tempName(base)
		err := unix.Mkdirat(parent, name, 0o700)
		if err != unix.EEXIST {
			return name, err
		}
	}
	return "", unix.EEXIST
}

// abandon removes the staged top-level directory of a failed extraction.
func (x *extractor) abandon() error {
	if x.stage == "" {
		return nil
	}
	// os.RemoveAll never follows symlinks below its argument.
	p := filepath.Join(x.destDir, x.stage)
	if err := os.RemoveAll(p); err != nil {
		return fmt.Errorf("safetar: remove the partial copy %s: %w", p, err)
	}
	return nil
}

// hostComps maps an entry's components to the names in destDir.
func (x *extractor) hostComps(comps []string) []string {
	comps[0] = x.hostTop
	return comps
}

// ours reports whether the entry at comps is one this call wrote. Only
// called when extracting into a directory that existed before.
func (x *extractor) ours(comps []string) bool {
	_, ok := x.written[strings.Join(comps, "/")]
	return ok
}

// wrote records a non-directory entry this call wrote into a directory that
// existed before.
func (x *extractor) wrote(comps []string) {
	if x.stage != "" {
		return
	}
	key := strings.Join(comps, "/")
	if x.writtenBytes+len(key) > maxWrittenBytes {
		return
	}
	if x.written == nil {
		x.written = map[string]struct{}{}
	}
	x.written[key] = struct{}{}
	x.writtenBytes += len(key)
}

func (x *extractor) entry(hdr *tar.Header, data io.Reader) error {
	for k := range hdr.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return unsafef("sparse files are not supported")
		}
	}
	switch hdr.Typeflag {
	case tar.TypeXGlobalHeader:
		return nil
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		if x.opts.SkipDevices {
			return nil
		}
		return unsafef("%s refused: device nodes and FIFOs are not copied", specialNames[hdr.Typeflag])
	case tar.TypeReg, tar.TypeDir, tar.TypeSymlink, tar.TypeLink:
	default:
		return unsafef("unsupported entry type %q", hdr.Typeflag)
	}
	comps, err := x.target(hdr.Name)
	if err != nil || comps == nil {
		return err
	}
	if x.hostTop == "" {
		if err := x.place(hdr.Typeflag, comps); err != nil {
			return err
		}
	}
	comps = x.hostComps(comps)
	parent, err := x.parent(comps[:len(comps)-1])
	if err != nil {
		return err
	}
	base := comps[len(comps)-1]
	switch hdr.Typeflag {
	case tar.TypeReg:
		err = x.file(parent, base, hdr, data)
	case tar.TypeDir:
		return x.dir(parent, base, comps, hdr)
	case tar.TypeSymlink:
		err = x.symlink(parent, base, comps, hdr)
	default:
		err = x.link(parent, base, hdr)
	}
	switch err {
	case nil:
		x.wrote(comps)
	case errSkipped:
		return nil
	}
	return err
}

// file writes a regular file under a temporary name in parent and renames
// it over base at the end, so a copy that fails (a full disk, a vanished
// client) neither leaves a partial file behind nor loses the file it was
// to replace. The rename replaces a symlink at base, never what it points
// to.
//
// Inside a staged top-level directory (see place) the file is created at
// its name directly: nobody sees the directory before finish renames it
// into place, and abandon removes all of it on failure, so a temporary
// name and a rename per file would add nothing but system calls. A name
// the archive lists twice falls back to the temporary name.
func (x *extractor) file(parent int, base string, hdr *tar.Header, data io.Reader) (err error) {
	tmp, fd := "", -1
	if x.stage != "" {
		var cerr error
		fd, cerr = unix.Openat(parent, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if cerr != nil && cerr != unix.EEXIST {
			return fmt.Errorf("create: %w", cerr)
		}
	}
	if fd < 0 {
		if err := notADir(parent, base); err != nil {
			return err
		}
		var cerr error
		if tmp, fd, cerr = createTemp(parent, base); cerr != nil {
			return fmt.Errorf("create: %w", cerr)
		}
	}
	// From here on fd is a file this call created, at tmp or (no tmp)
	// at base: on failure it is removed again.
	made, closed := tmp, false
	if made == "" {
		made = base
	}
	defer func() {
		if !closed {
			unix.Close(fd)
		}
		if err != nil {
			_ = unix.Unlinkat(parent, made, 0)
		}
	}()
	buf := copyBufs.Get().(*[copyBuf]byte)
	defer copyBufs.Put(buf)
	// Straight to the descriptor: an os.File costs an fcntl and a
	// finalizer per file, and its ReadFrom would copy 32 KiB at a time.
	if _, err := io.CopyBuffer(fdWriter(fd), data, buf[:]); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	// Exact bits regardless of umask; setuid/setgid never survive.
	if err := unix.Fchmod(fd, uint32(hdr.Mode)&0o777); err != nil {
		return fmt.Errorf("chmod: %w", err)
	}
	if err := x.chown(fd, ""); err != nil {
		return err
	}
	futimens(fd, hdr.ModTime) // best effort: a wrong mtime is not worth failing for
	closed = true
	if err := unix.Close(fd); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	if tmp == "" {
		return nil
	}
	if err := unix.Renameat(parent, tmp, parent, base); err != nil {
		if err == unix.EISDIR || err == unix.ENOTEMPTY || err == unix.EEXIST {
			return fmt.Errorf("%w: a directory is in the way", fs.ErrExist)
		}
		return fmt.Errorf("rename into place: %w", err)
	}
	return nil
}

// fdWriter writes to a file descriptor, all of p or an error.
type fdWriter int

func (w fdWriter) Write(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m, err := unix.Write(int(w), p[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		if m == 0 {
			return n, io.ErrShortWrite
		}
		n += m
	}
	return n, nil
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

// tempName returns a new hidden name next to base.
func tempName(base string) string {
	suffix := ".boxd-" + strconv.FormatUint(rand.Uint64(), 36)
	if name := "." + base + suffix; len(name) <= 255 {
		return name
	}
	return suffix
}

// createTemp creates an empty file, mode 0600, under a new hidden name next
// to base.
func createTemp(parent int, base string) (string, int, error) {
	// O_EXCL makes a clash harmless; the randomness only makes it rare.
	for range 10 {
		name := tempName(base)
		fd, err := unix.Openat(parent, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != unix.EEXIST {
			return name, fd, CreateError(parent, err)
		}
	}
	return "", -1, unix.EEXIST
}

// dir makes a directory entry. A directory that already existed keeps its
// mode (and owner): only directories this call creates get the archive's
// mode. (In a top-level directory that existed before, a directory the
// archive lists only after its contents keeps the mode it was made with,
// 0755 less the umask: this call cannot tell it from the host's.)
func (x *extractor) dir(parent int, base string, comps []string, hdr *tar.Header) error {
	perm := uint32(hdr.Mode) & 0o777
	if hdr.Mode&0o1000 != 0 {
		perm |= unix.S_ISVTX
	}
	staged := x.stage != ""
	if staged && len(comps) == 1 {
		// The staged top-level directory: kept private until finish.
		x.stagePerm = perm
		return nil
	}
	created := true
	if err := unix.Mkdirat(parent, base, 0o700); err == unix.EEXIST {
		created = false
	} else if err != nil {
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
	// Everything below a staged directory was made by this call (an entry
	// listed after its contents, or twice); elsewhere an existing
	// directory is the host's and keeps its mode.
	if !created && !staged {
		return nil
	}
	now := perm
	if perm&0o700 != 0o700 && len(x.dirs) < maxDeferredDirs {
		// Keep it writable until the end so its contents can be created.
		now |= 0o700
		x.dirs = append(x.dirs, deferredDir{comps: comps, perm: perm})
	}
	if err := unix.Fchmod(fd, now); err != nil {
		return fmt.Errorf("chmod: %w", err)
	}
	return x.chown(fd, "")
}

// symlink makes a symlink entry. Unless opts.Links is LinksKeep, its target
// must stay within the top-level entry (see confined).
func (x *extractor) symlink(parent int, base string, comps []string, hdr *tar.Header) error {
	t := hdr.Linkname
	switch {
	case t == "":
		return unsafef("empty symlink target")
	case len(t) > MaxNameLen:
		return unsafef("symlink target longer than %d bytes", MaxNameLen)
	case strings.IndexByte(t, 0) >= 0:
		return unsafef("symlink target contains NUL")
	}
	if x.opts.Links != LinksKeep && !confined(comps, t) {
		if x.opts.Links == LinksSkipUnsafe {
			if x.opts.Skipped != nil {
				x.opts.Skipped(hdr.Name, t)
			}
			return errSkipped
		}
		return &LinkOutsideError{Target: shorten(t), Top: x.top}
	}
	// The link is created, never followed here.
	_, err := retryExisting(parent, base, func() (int, error) {
		return -1, unix.Symlinkat(t, parent, base)
	})
	if err != nil {
		return fmt.Errorf("symlink: %w", err)
	}
	return x.chown(parent, base)
}

// chown gives what this call created to opts.Owner: the descriptor fd
// itself (base empty), or the symlink base in the directory fd.
func (x *extractor) chown(fd int, base string) error {
	o := x.opts.Owner
	if o == nil {
		return nil
	}
	var err error
	if base == "" {
		err = unix.Fchownat(fd, "", o.UID, o.GID, unix.AT_EMPTY_PATH)
	} else {
		err = unix.Fchownat(fd, base, o.UID, o.GID, unix.AT_SYMLINK_NOFOLLOW)
	}
	if err != nil {
		return fmt.Errorf("chown: %w", err)
	}
	return nil
}

var specialNames = map[byte]string{tar.TypeChar: "character device", tar.TypeBlock: "block device", tar.TypeFifo: "FIFO"}

// errSkipped tells entry that nothing was written; Extract goes on.
var errSkipped = errors.New("skipped")

// confined reports whether a symlink at comps (comps[0] the top-level name)
// whose target is t resolves within the top-level entry, whatever the other
// symlinks in the tree say. The target must be relative, and its ".."
// components must all lead (after a name, ".." would climb from wherever a
// symlink of that name leads, not from the name's directory), and they may
// not climb above the top-level entry. Every link accepted this way goes up
// through real directories and then down, so a chain of them stays inside
// too. A top-level symlink is resolved from destDir, so it is never
// confined.
func confined(comps []string, t string) bool {
	if strings.HasPrefix(t, "/") {
		return false
	}
	depth := len(comps) - 1 // directories between destDir and the link
	named := false
	for c := range strings.SplitSeq(t, "/") {
		switch c {
		case "", ".":
		case "..":
			if named {
				return false
			}
			depth--
		default:
			named = true
		}
	}
	return depth >= 1
}

// link makes a hard link entry, to an entry this call already wrote.
func (x *extractor) link(parent int, base string, hdr *tar.Header) error {
	// The target is an entry name like any other: same top-level, same rename.
	tcomps, err := x.target(hdr.Linkname)
	if err != nil {
		return fmt.Errorf("hard link target: %w", err)
	}
	if tcomps == nil {
		return unsafef("hard link to the archive root")
	}
	tcomps = x.hostComps(tcomps)
	if x.stage == "" && !x.ours(tcomps) {
		return unsafef("hard link to %q, which this archive did not write before", shorten(hdr.Linkname))
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
// finish applies the directory modes that were held back, deepest first,
// then moves a staged top-level directory into place.
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
	if err := errors.Join(errs...); err != nil || x.stage == "" {
		return err
	}
	name := x.name()
	fd, err := openDir(x.root, []string{x.stage}, false)
	if err == nil {
		err = unix.Fchmod(fd, x.stagePerm)
		if err == nil {
			err = x.chown(fd, "")
		}
		unix.Close(fd)
	}
	if err != nil {
		return fmt.Errorf("safetar: set mode of %q: %w", name, err)
	}
	// NOREPLACE: something that appeared at the name meanwhile is not ours
	// to replace.
	if err := unix.Renameat2(x.root, x.stage, x.root, name, unix.RENAME_NOREPLACE); err != nil {
		return fmt.Errorf("safetar: move %q into place: %w", name, err)
	}
	x.stage = ""
	return nil
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

// CreateError corrects the error of an O_CREAT of a new name in the open
// directory dirfd. procfs (/proc, /proc/sys) has a fixed set of names and
// answers ENOENT, which reads as "no such file" of a file that is there:
// it is EACCES, as sysfs answers, unless the directory itself was removed
// meanwhile (no links left).
func CreateError(dirfd int, err error) error {
	if err != unix.ENOENT {
		return err
	}
	var st unix.Stat_t
	if unix.Fstat(dirfd, &st) == nil && st.Nlink > 0 {
		return unix.EACCES
	}
	return err
}
