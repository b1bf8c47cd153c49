//go:build linux

package insandbox

// File operations, served by the init inside the sandbox. Which operations
// follow symlinks:
//
//   - Every operation follows symlinks in the directories leading to the
//     final component: they resolve inside the sandbox's own root, which is
//     the init's root, so they cannot reach the host. Files are opened
//     without following magic links (/proc/PID/fd/N...), the one kind of
//     link that could lead to something the init holds open.
//   - The final component is followed by read, download and list (the
//     listed directory; symlinks inside it are listed, not entered), and by
//     stat only when asked (follow).
//   - It is never followed by write and upload (an atomic write replaces a
//     symlink with a regular file; an in-place write refuses it), chmod
//     (refuses), mkdir, remove (removes the link) and rename (renames the
//     link). Read and download refuse it when asked (no_follow).
//
// A directory swapped for a symlink while an operation runs does not
// redirect it: the operation holds the directory it resolved open and
// works relative to it.

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/boxd-dev/boxd/agent/wire"
	"github.com/boxd-dev/boxd/internal/safetar"
)

// fsDecodeArgs decodes a request's arguments strictly: an init that does not
// know a field (an older init under a newer boxd) must refuse the request,
// not silently ignore, say, no_follow.
func fsDecodeArgs(req *wire.Request, v any) error {
	if len(req.Args) == 0 {
		return fmt.Errorf("%w: %s request without arguments", wire.ErrInvalid, req.Op)
	}
	d := json.NewDecoder(bytes.NewReader(req.Args))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("%w: malformed %s arguments: %v", wire.ErrInvalid, req.Op, err)
	}
	return nil
}

// fileSetup decodes the arguments and resolves the user, replying with the
// error if either fails.
func (s *Server) fileSetup(fw *wire.FrameWriter, req *wire.Request, args any, user func() string) (*fsIdentity, bool) {
	if err := fsDecodeArgs(req, args); err != nil {
		s.replyError(fw, req.Op, err)
		return nil, false
	}
	spec := user()
	if spec == "" {
		spec = s.User
	}
	id, err := lookupFileUser(spec)
	if err != nil {
		s.replyError(fw, req.Op, fsFail(req.Op, "", err))
		return nil, false
	}
	return id, true
}

// fsWriteTarget is a file being written: a temporary file next to the
// target (atomic mode) or the target itself (in place).
type fsWriteTarget struct {
	id      *fsIdentity
	path    string // clean absolute path, for messages
	dirfd   int
	ownsDir bool // dirfd is ours to close (not a fsDirCache's)
	base    string
	tmp     string // temporary name in dirfd; empty in place
	fd      int
	// What the finished file gets: mode, and in atomic mode the owner of
	// the file it replaces (root only: others cannot give files away).
	mode       uint32
	setMode    bool // the host asked for mode
	chmodLater bool // the file is not created with mode: fchmod at commit
	chown      bool
	uid, gid   int
	exclusive  bool
}

// fsDirCache keeps the directories of one upload open, so a thousand
// files in one directory resolve it, and create its parents, once. Its
// descriptors belong to the upload's identity: it is never shared.
type fsDirCache struct {
	fds map[string]int
}

// fsMaxCachedDirs bounds the descriptors an upload holds open.
const fsMaxCachedDirs = 64

// get opens dir (with parents, creating it first). It runs as the
// upload's user.
func (c *fsDirCache) get(dir string, parents bool) (int, error) {
	if fd, ok := c.fds[dir]; ok {
		return fd, nil
	}
	if parents {
		if err := fsMkdirAll(dir); err != nil {
			return -1, err
		}
	}
	fd, err := fsOpenDir(dir)
	if err != nil {
		return -1, err
	}
	if len(c.fds) >= fsMaxCachedDirs {
		c.close()
	}
	if c.fds == nil {
		c.fds = map[string]int{}
	}
	c.fds[dir] = fd
	return fd, nil
}

func (c *fsDirCache) close() {
	for _, fd := range c.fds {
		unix.Close(fd)
	}
	clear(c.fds)
}

// fsMkdirAll is mkdir -p with 0755 directories. A component that exists
// but is no directory (a file, a dangling symlink) is ENOTDIR, not the
// EEXIST mkdir reports, which would read as if the target existed.
func fsMkdirAll(dir string) error {
	err := fsUnwrapPathError(os.MkdirAll(dir, 0o755))
	if err == unix.EEXIST {
		return unix.ENOTDIR
	}
	return err
}

// fsUmask is the init's umask, or -1 if unknown. It is read from /proc
// once: umask(2) can only read it by changing it, which would race with
// files being created meanwhile.
var fsUmask = sync.OnceValue(func() int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "Umask:"); ok {
			if m, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32); err == nil {
				return int(m)
			}
		}
	}
	return -1
})

// fsOpenWriteTarget prepares path for writing as id. Nothing is visible at
// path until commit, unless writing in place. dirs, if not nil, holds the
// directories of a bulk upload.
func fsOpenWriteTarget(id *fsIdentity, path string, a *wire.FileWriteArgs, dirs *fsDirCache) (*fsWriteTarget, error) {
	dir, base := splitFilePath(path)
	if base == "" {
		return nil, unix.EISDIR
	}
	t := &fsWriteTarget{id: id, path: path, dirfd: -1, fd: -1, base: base, exclusive: a.Exclusive, mode: 0o644}
	if a.Mode != nil {
		if err := fsPerm("mode", *a.Mode); err != nil {
			return nil, err
		}
		t.mode, t.setMode = *a.Mode, true
	}
	err := id.do(func() error {
		var err error
		if dirs != nil {
			t.dirfd, err = dirs.get(dir, a.Parents)
			return t.open(a, err)
		}
		if a.Parents {
			if err := fsMkdirAll(dir); err != nil {
				return err
			}
		}
		t.dirfd, err = fsOpenDir(dir)
		t.ownsDir = err == nil
		return t.open(a, err)
	})
	if err != nil {
		t.abort()
		return nil, err
	}
	return t, nil
}

func (t *fsWriteTarget) open(a *wire.FileWriteArgs, dirErr error) error {
	if dirErr != nil {
		return dirErr
	}
	if a.InPlace || a.Append {
		return t.openInPlace(a)
	}
	return t.openTemp()
}

func (t *fsWriteTarget) openInPlace(a *wire.FileWriteArgs) error {
	// Non-blocking: opening a FIFO for writing would wait for a reader.
	flags := unix.O_WRONLY | unix.O_CREAT | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_NOCTTY
	switch {
	case a.Append:
		flags |= unix.O_APPEND
	default:
		flags |= unix.O_TRUNC
	}
	if a.Exclusive {
		flags |= unix.O_EXCL
	}
	fd, err := fsOpen(t.dirfd, t.base, flags, t.mode, 0)
	if err == unix.ELOOP && fsIsSymlinkAt(t.dirfd, t.base) {
		return fsNotFollowed("write", t.path)
	}
	if err != nil {
		return err
	}
	t.fd = fd
	t.chmodLater = t.setMode
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return &wire.RemoteError{Message: fmt.Sprintf("write %s: not a regular file (%s)", wire.QuotePath(t.path), fsType(st.Mode)), Code: wire.CodeFailedPrecondition}
	}
	return nil
}

func (t *fsWriteTarget) openTemp() error {
	var st unix.Stat_t
	err := unix.Fstatat(t.dirfd, t.base, &st, unix.AT_SYMLINK_NOFOLLOW)
	switch {
	case err == nil && t.exclusive:
		return unix.EEXIST
	case err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR:
		return unix.EISDIR
	case err == nil && st.Mode&unix.S_IFMT == unix.S_IFREG:
		if !t.setMode {
			t.mode = st.Mode & 0o7777
		}
		// Root's new file is 0:0; a replaced file keeps its owner.
		if t.id == nil && (st.Uid != 0 || st.Gid != 0) {
			t.chown, t.uid, t.gid = true, int(st.Uid), int(st.Gid)
		}
	case err != nil && err != unix.ENOENT:
		return err
	}
	// Created with its final mode when the umask leaves it alone, saving
	// a system call per file; setuid, setgid and sticky bits are set
	// after the data, since writing as non-root clears them.
	createMode := t.mode
	if um := fsUmask(); t.chown || um < 0 || t.mode&uint32(um) != 0 || t.mode&0o7000 != 0 {
		createMode, t.chmodLater = 0o600, true
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	t.tmp = ".boxd-tmp-" + hex.EncodeToString(rnd[:])
	t.fd, err = fsOpen(t.dirfd, t.tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW, createMode, 0)
	if err != nil {
		t.tmp = ""
	}
	return safetar.CreateError(t.dirfd, err)
}

// commit gives the file its owner and mode and, in atomic mode, renames it
// over the target. With stat it describes the result.
func (t *fsWriteTarget) commit(stat bool) (wire.FileStat, error) {
	var fi wire.FileStat
	err := t.id.do(func() error {
		if t.chown {
			// Before chmod: chown clears setuid and setgid bits.
			if err := unix.Fchown(t.fd, t.uid, t.gid); err != nil {
				return err
			}
		}
		if t.chmodLater {
			if err := unix.Fchmod(t.fd, t.mode); err != nil {
				return err
			}
		}
		if t.tmp != "" {
			if err := fsRename(t.dirfd, t.tmp, t.dirfd, t.base, t.exclusive); err != nil {
				return err
			}
			t.tmp = ""
		}
		if !stat {
			return nil
		}
		var err error
		fi, err = fsStatFD(t.fd, t.path, t.base)
		return err
	})
	t.abort()
	return fi, err
}

// abort removes the temporary file, if any, and closes what it holds.
func (t *fsWriteTarget) abort() {
	if t.tmp != "" && t.dirfd >= 0 {
		t.id.do(func() error { return unix.Unlinkat(t.dirfd, t.tmp, 0) })
		t.tmp = ""
	}
	if t.fd >= 0 {
		unix.Close(t.fd)
		t.fd = -1
	}
	if t.dirfd >= 0 && t.ownsDir {
		unix.Close(t.dirfd)
	}
	t.dirfd = -1
}

// fsRename renames within or across directories; rename(2) never
// follows symlinks at either end. With noReplace an existing destination is
// an error, also on file systems without RENAME_NOREPLACE (via link, which
// fails on an existing name, for files).
func fsRename(olddir int, oldname string, newdir int, newname string, noReplace bool) error {
	if !noReplace {
		return unix.Renameat(olddir, oldname, newdir, newname)
	}
	err := unix.Renameat2(olddir, oldname, newdir, newname, unix.RENAME_NOREPLACE)
	if err != unix.EINVAL && err != unix.ENOSYS {
		return err
	}
	var st unix.Stat_t
	if unix.Fstatat(olddir, oldname, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return err // e.g. a directory moved into itself: EINVAL is the answer
	}
	if err := unix.Linkat(olddir, oldname, newdir, newname, 0); err != nil {
		return err
	}
	return unix.Unlinkat(olddir, oldname, 0)
}

// fsUnwrapPathError reduces an *os.PathError to its errno, so messages name
// the path the host gave, not the init's internals.
func fsUnwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// fsReceiveData writes the data frames that follow to fd (none if fd < 0)
// until data-end. A failure to write is werr; with drain the remaining
// frames are still read (the connection carries more after them), else
// fsReceiveData returns at once. A broken stream is serr.
func fsReceiveData(fr *wire.FrameReader, fd int, drain bool) (n int64, werr, serr error) {
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			if err == io.EOF {
				err = fmt.Errorf("%w: stream ended before %s frame", io.ErrUnexpectedEOF, wire.FrameFileDataEnd)
			}
			return n, werr, err
		}
		switch f.Type {
		case wire.FrameFileData:
			if fd >= 0 && werr == nil {
				if werr = fsWriteAll(fd, f.Payload); werr != nil && !drain {
					return n, werr, nil
				}
			}
			n += int64(len(f.Payload))
		case wire.FrameFileDataEnd:
			return n, werr, nil
		default:
			return n, werr, wire.UnexpectedFrame(f.Type)
		}
	}
}

// fsHostGone reports whether err is the host's side of the connection
// failing, after which there is nobody to reply to.
func fsHostGone(err error) bool {
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, unix.ECONNRESET) || errors.Is(err, unix.EPIPE)
}

func (s *Server) fileWrite(conn net.Conn, fr *wire.FrameReader, fw *wire.FrameWriter, req *wire.Request) {
	var a wire.FileWriteArgs
	id, ok := s.fileSetup(fw, req, &a, func() string { return a.User })
	if !ok {
		return
	}
	p, err := cleanFilePath(s.workdir(), a.Path)
	if err != nil {
		s.replyError(fw, "write", err)
		return
	}
	t, err := fsOpenWriteTarget(id, p, &a, nil)
	if err != nil {
		// The host may still be sending data; the error frame reaches it
		// before the connection closes.
		s.replyError(fw, "write", fsFail("write", p, err))
		return
	}
	n, werr, serr := fsReceiveData(fr, t.fd, false)
	if werr != nil || serr != nil {
		t.abort()
		if werr != nil {
			s.replyError(fw, "write", fsFail("write", p, werr))
		} else if !fsHostGone(serr) {
			s.replyError(fw, "write", serr)
		}
		return
	}
	fi, err := t.commit(true)
	if err != nil {
		s.replyError(fw, "write", fsFail("write", p, err))
		return
	}
	fw.WriteJSON(wire.FrameResult, wire.FileWriteResult{Bytes: n, Stat: fi})
}

// fsOpenRead opens path for reading as id: a regular file only, so that a
// FIFO or a device cannot stall or flood the reader.
func fsOpenRead(id *fsIdentity, path string, noFollow bool) (fd int, fi wire.FileStat, err error) {
	err = id.do(func() error {
		flags := unix.O_RDONLY | unix.O_NONBLOCK | unix.O_NOCTTY
		if noFollow {
			flags |= unix.O_NOFOLLOW
		}
		var err error
		fd, err = fsOpen(unix.AT_FDCWD, path, flags, 0, 0)
		if err == unix.ELOOP && noFollow && fsIsSymlinkAt(unix.AT_FDCWD, path) {
			return fsNotFollowed("read", path)
		}
		return err
	})
	if err != nil {
		return -1, fi, err
	}
	_, base := splitFilePath(path)
	if fi, err = fsStatFD(fd, path, base); err != nil {
		unix.Close(fd)
		return -1, fi, err
	}
	switch fi.Type {
	case wire.FileTypeRegular:
		return fd, fi, nil
	case wire.FileTypeDir:
		err = unix.EISDIR
	default:
		err = &wire.RemoteError{Message: fmt.Sprintf("read %s: not a regular file (%s)", wire.QuotePath(path), fi.Type), Code: wire.CodeFailedPrecondition}
	}
	unix.Close(fd)
	return -1, fi, err
}

// fsSendData streams length bytes (0: to the end) of fd from offset as
// data frames. It does not send data-end.
func fsSendData(fw *wire.FrameWriter, fd int, offset, length int64) (int64, error) {
	buf := fileReadBufs.Get().(*[wire.FileChunk]byte)
	defer fileReadBufs.Put(buf)
	var sent int64
	for length == 0 || sent < length {
		want := int64(len(buf))
		if length > 0 {
			want = min(want, length-sent)
		}
		n, err := fsPreadFull(fd, buf[:want], offset+sent)
		if n > 0 {
			if werr := fw.WriteFrame(wire.FrameFileData, buf[:n]); werr != nil {
				return sent, fmt.Errorf("%w: %v", errFileHostWrite, werr)
			}
			sent += int64(n)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return sent, err
		}
	}
	return sent, nil
}

// errFileHostWrite marks a failure sending to the host, which ends the
// operation without a reply.
var errFileHostWrite = errors.New("send to host")

func (s *Server) fileRead(conn net.Conn, fr *wire.FrameReader, fw *wire.FrameWriter, req *wire.Request) {
	var a wire.FileReadArgs
	id, ok := s.fileSetup(fw, req, &a, func() string { return a.User })
	if !ok {
		return
	}
	p, err := cleanFilePath(s.workdir(), a.Path)
	if err != nil {
		s.replyError(fw, "read", err)
		return
	}
	if a.Offset < 0 || a.Length < 0 {
		s.replyError(fw, "read", fmt.Errorf("%w: offset and length must not be negative", wire.ErrInvalid))
		return
	}
	fd, fi, err := fsOpenRead(id, p, a.NoFollow)
	if err != nil {
		s.replyError(fw, "read", fsFail("read", p, err))
		return
	}
	defer unix.Close(fd)
	wire.SetFileSocketBuffer(conn)
	if err := fw.WriteJSON(wire.FrameResult, fi); err != nil {
		return
	}
	if _, err := fsSendData(fw, fd, a.Offset, a.Length); err != nil {
		if !errors.Is(err, errFileHostWrite) {
			s.replyError(fw, "read", fsFail("read", p, err))
		}
		return
	}
	fw.WriteFrame(wire.FrameFileDataEnd, nil)
}

func (s *Server) fileStat(conn net.Conn, fr *wire.FrameReader, fw *wire.FrameWriter, req *wire.Request) {
	var a wire.FileStatArgs
	id, ok := s.fileSetup(fw, req, &a, func() string { return a.User })
	if !ok {
		return
	}
	p, err := cleanFilePath(s.workdir(), a.Path)
	if err != nil {
		s.replyError(fw, "stat", err)
		return
	}
	var fi wire.FileStat
	err = id.do(func() (err error) {
		fi, err = fsStatPath(p, a.Follow)
		return err
	})
	if err != nil {
		s.replyError(fw, "stat", fsFail("stat", p, err))
		return
	}
	fw.WriteJSON(wire.FrameResult, fi)
}

// fsStatPath describes the clean absolute path p, following a final
// symlink only with follow: the stat of file-stat and of the older stat
// op.
func fsStatPath(p string, follow bool) (wire.FileStat, error) {
	flags := unix.O_PATH
	if !follow {
		flags |= unix.O_NOFOLLOW
	}
	fd, err := fsOpen(unix.AT_FDCWD, p, flags, 0, 0)
	if err != nil {
		return wire.FileStat{}, err
	}
	defer unix.Close(fd)
	_, base := splitFilePath(p)
	if base == "" {
		base = "/"
	}
	return fsStatFD(fd, p, base)
}

// fsLister walks a directory tree and sends its entries in batches.
type fsLister struct {
	jsonBatcher
}

// fsReadNames reads the names in the directory open at dirfd, sorted.
func fsReadNames(dirfd int) ([]string, error) {
	// Through a duplicate: os.File closes what it wraps, and the caller
	// keeps using dirfd.
	dup, err := unix.FcntlInt(uintptr(dirfd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(dup), "dir")
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, fsUnwrapPathError(err)
	}
	slices.Sort(names)
	return names, nil
}

// walk sends the entries of the directory open at dirfd, whose names are
// given; rel is its path relative to the listed root and depth the levels
// still to list. Only failures to reach the host end the walk: a directory
// that cannot be read is reported in its entry's Error.
func (l *fsLister) walk(dirfd int, names []string, rel string, depth int) error {
	for _, name := range names {
		p := name
		if rel != "" {
			p = rel + "/" + name
		}
		var st unix.Stat_t
		if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if err == unix.ENOENT {
				continue // removed while we list
			}
			_, text := fsErrorCode(fsErrno(err))
			if err := l.add(wire.FileStat{Path: p, Name: name, Error: text}); err != nil {
				return err
			}
			continue
		}
		fi := fsStatOf(&st, p, name)
		if fi.Type == wire.FileTypeSymlink {
			fi.LinkTarget, _ = fsReadlink(dirfd, name)
		}
		if fi.Type != wire.FileTypeDir || depth <= 1 {
			if err := l.add(fi); err != nil {
				return err
			}
			continue
		}
		// O_NOFOLLOW: a directory swapped for a symlink since the fstatat
		// is not entered.
		sub, err := fsOpen(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0, 0)
		var subNames []string
		if err != nil {
			sub = -1
		} else if subNames, err = fsReadNames(sub); err != nil {
			unix.Close(sub)
			sub = -1
		}
		if err != nil {
			_, fi.Error = fsErrorCode(fsErrno(err))
		}
		if aerr := l.add(fi); aerr != nil {
			if sub >= 0 {
				unix.Close(sub)
			}
			return aerr
		}
		if sub < 0 {
			continue
		}
		err = l.walk(sub, subNames, p, depth-1)
		unix.Close(sub)
		if err != nil {
			return err
		}
	}
	return nil
}

func fsErrno(err error) unix.Errno {
	var errno unix.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return unix.EIO
}

func (s *Server) fileList(conn net.Conn, fr *wire.FrameReader, fw *wire.FrameWriter, req *wire.Request) {
	var a wire.FileListArgs
	id, ok := s.fileSetup(fw, req, &a, func() string { return a.User })
	if !ok {
		return
	}
	p, err := cleanFilePath(s.workdir(), a.Path)
	if err != nil {
		s.replyError(fw, "list", err)
		return
	}
	depth := a.Depth
	switch {
	case depth == 0:
		depth = 1
	case depth < 0 || depth > wire.MaxListDepth:
		depth = wire.MaxListDepth
	}
	l := &fsLister{jsonBatcher{fw: fw}}
	err = id.do(func() error {
		fd, err := fsOpen(unix.AT_FDCWD, p, unix.O_RDONLY|unix.O_DIRECTORY, 0, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		names, err := fsReadNames(fd)
		if err != nil {
			return err
		}
		if err := l.walk(fd, names, "", depth); err != nil {
			return err
		}
		return l.flush()
	})
	if err != nil {
		if !errors.Is(err, errFileHostWrite) {
			s.replyError(fw, "list", fsFail("list", p, err))
		}
		return
	}
	fw.WriteFrame(wire.FrameOK, nil)
}

func (s *Server) fileMkdir(conn net.Conn, fr *wire.FrameReader, fw *wire.FrameWriter, req *wire.Request) {
	var a wire.FileMkdirArgs
	id, ok := s.fileSetup(fw, req, &a, func() string { return a.User })
	if !ok {
		return
	}
	p, err := cleanFilePath(s.workdir(), a.Path)
	if err == nil && a.Mode != nil {
		err = fsPerm("mode", *a.Mode)
	}
	if err != nil {
		s.replyError(fw, "mkdir", err)
		return
	}
	err = id.do(func() error {
		dir, base := splitFilePath(p)
		if base == "" {
			if a.Parents {
				return nil
			}
			return unix.EEXIST
		}
		if a.Parents {
			if err := fsMkdirAll(dir); err != nil {
				return err
			}
		}
		dirfd, err := fsOpenDir(dir)
		if err != nil {
			return err
		}
		defer unix.Close(dirfd)
		mode := uint32(0o755)
		if a.Mode != nil {
			mode = *a.Mode
		}
		if err := unix.Mkdirat(dirfd, base, mode); err != nil {
			if err == unix.EEXIST && a.Parents {
				// mkdir -p: an existing directory (or a symlink to one)
				// is success.
				var st unix.Stat_t
				if unix.Fstatat(dirfd, base, &st, 0) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
					return nil
				}
				return unix.ENOTDIR
			}
			return err
		}
		if a.Mode == nil {
			return nil
		}
		// The umask filtered the mode; set it exactly, on the directory
		// just made, never through a symlink swapped in for it.
		fd, err := fsOpen(dirfd, base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Fchmod(fd, mode)
	})
	if err != nil {
		s.replyError(fw, "mkdir", fsFail("mkdir", p, err))
		return
	}
	fw.WriteFrame(wire.FrameOK, nil)
}

func (s *Server) fileRemove(conn net.Conn, fr *wire.FrameReader, fw *wire.FrameWriter, req *wire.Request) {
	var a wire.FileRemoveArgs
	id, ok := s.fileSetup(fw, req, &a, func() string { return a.User })
	if !ok {
		return
	}
	p, err := cleanFilePath(s.workdir(), a.Path)
	if err == nil && p == "/" {
		err = fmt.Errorf("%w: refusing to remove /", wire.ErrInvalid)
	}
	if err != nil {
		s.replyError(fw, "remove", err)
		return
	}
	err = id.do(func() error {
		dir, base := splitFilePath(p)
		dirfd, err := fsOpenDir(dir)
		if err != nil {
			return err
		}
		defer unix.Close(dirfd)
		var st unix.Stat_t
		if err := unix.Fstatat(dirfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return unix.Unlinkat(dirfd, base, 0)
		}
		err = unix.Unlinkat(dirfd, base, unix.AT_REMOVEDIR)
		if err == unix.ENOTEMPTY || err == unix.EEXIST {
			if !a.Recursive {
				return &wire.RemoteError{Message: fmt.Sprintf("remove %s: directory not empty (remove it recursively)", wire.QuotePath(p)), Code: wire.CodeFailedPrecondition}
			}
			// os.RemoveAll works with openat/unlinkat and O_NOFOLLOW
			// below its starting point: a symlink inside the tree is
			// removed, never followed, even if swapped in meanwhile.
			return fsUnwrapPathError(os.RemoveAll(p))
		}
		return err
	})
	if err != nil {
		s.replyError(fw, "remove", fsFail("remove", p, err))
		return
	}
	fw.WriteFrame(wire.FrameOK, nil)
}

func (s *Server) fileRename(conn net.Conn, fr *wire.FrameReader, fw *wire.FrameWriter, req *wire.Request) {
	var a wire.FileRenameArgs
	id, ok := s.fileSetup(fw, req, &a, func() string { return a.User })
	if !ok {
		return
	}
	src, err := cleanFilePath(s.workdir(), a.Src)
	if err != nil {
		s.replyError(fw, "rename", fmt.Errorf("src: %w", err))
		return
	}
	dst, err := cleanFilePath(s.workdir(), a.Dst)
	if err != nil {
		s.replyError(fw, "rename", fmt.Errorf("dst: %w", err))
		return
	}
	if src == "/" || dst == "/" {
		s.replyError(fw, "rename", fmt.Errorf("%w: cannot rename / or onto /", wire.ErrInvalid))
		return
	}
	err = id.do(func() error {
		sdir, sbase := splitFilePath(src)
		ddir, dbase := splitFilePath(dst)
		sfd, err := fsOpenDir(sdir)
		if err != nil {
			return err
		}
		defer unix.Close(sfd)
		dfd, err := fsOpenDir(ddir)
		if err != nil {
			return fmt.Errorf("destination directory: %w", err)
		}
		defer unix.Close(dfd)
		return fsRename(sfd, sbase, dfd, dbase, a.NoOverwrite)
	})
	if err != nil {
		s.replyError(fw, "rename", fsFail("rename "+wire.QuotePath(src)+" to", dst, err))
		return
	}
	fw.WriteFrame(wire.FrameOK, nil)
}

func (s *Server) fileChmod(conn net.Conn, fr *wire.FrameReader, fw *wire.FrameWriter, req *wire.Request) {
	var a wire.FileChmodArgs
	id, ok := s.fileSetup(fw, req, &a, func() string { return a.User })
	if !ok {
		return
	}
	p, err := cleanFilePath(s.workdir(), a.Path)
	if err == nil {
		err = fsPerm("mode", a.Mode)
	}
	if err != nil {
		s.replyError(fw, "chmod", err)
		return
	}
	err = id.do(func() error {
		fd, err := fsOpen(unix.AT_FDCWD, p, unix.O_PATH|unix.O_NOFOLLOW, 0, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return err
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return fsNotFollowed("chmod", p)
		}
		return fsChmodFD(fd, a.Mode)
	})
	if err != nil {
		s.replyError(fw, "chmod", fsFail("chmod", p, err))
		return
	}
	fw.WriteFrame(wire.FrameOK, nil)
}

// fsChmodFD changes the mode of the file an O_PATH descriptor refers to:
// fchmodat2 with AT_EMPTY_PATH (Linux 6.6), else through /proc/self/fd,
// which is how the C library does it. Either way the file is the one
// opened, whatever happens to its name meanwhile.
func fsChmodFD(fd int, mode uint32) error {
	// EPERM too: a seccomp profile that predates fchmodat2 refuses it so.
	// A real EPERM comes back again from the fallback.
	err := unix.Fchmodat(fd, "", mode, unix.AT_EMPTY_PATH)
	if err != unix.EOPNOTSUPP && err != unix.ENOSYS && err != unix.EINVAL && err != unix.EPERM {
		return err
	}
	for {
		err = unix.Chmod(fmt.Sprintf("/proc/self/fd/%d", fd), mode)
		if err != unix.EINTR {
			return err
		}
	}
}
