//go:build linux

package insandbox

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxd-dev/boxd/agent/wire"
)

// do runs fn with id's filesystem identity: fsuid, fsgid and supplementary
// groups, which are per thread on Linux. fn runs on a goroutine locked to
// its OS thread, so the identity never leaks to other goroutines; threads
// the runtime starts meanwhile are cloned by its template thread, not by
// this one. Moving from fsuid 0 to another drops the file capabilities
// (DAC_OVERRIDE, FOWNER...) from the thread, so the kernel's permission
// checks are those of the user. If the identity cannot be restored the
// thread stays locked and exits with the goroutine, so the runtime
// discards it instead of reusing it. A nil identity is the init's own, and
// fn runs directly.
func (id *fsIdentity) do(fn func() error) error {
	if id == nil {
		return fn()
	}
	type outcome struct {
		err   error
		panic any
	}
	done := make(chan outcome, 1)
	go func() {
		runtime.LockOSThread()
		var out outcome
		restore, err := id.enter()
		if err == nil {
			func() {
				defer func() { out.panic = recover() }()
				out.err = fn()
			}()
		} else {
			out.err = err
		}
		if restore != nil {
			if rerr := restore(); rerr != nil {
				done <- outcome{err: fmt.Errorf("restore the init's identity: %w", rerr)}
				return // still locked: the thread dies with this goroutine
			}
		}
		runtime.UnlockOSThread()
		done <- out
	}()
	out := <-done
	if out.panic != nil {
		panic(out.panic)
	}
	return out.err
}

// enter switches the calling (locked) thread to id and returns how to
// switch back. restore is non-nil whenever anything was changed.
func (id *fsIdentity) enter() (restore func() error, err error) {
	origGroups, err := unix.Getgroups()
	if err != nil {
		return nil, fmt.Errorf("read groups: %w", err)
	}
	origUID, _ := unix.SetfsuidRetUid(-1) // -1 changes nothing and returns the current id
	origGID, _ := unix.SetfsgidRetGid(-1)
	restore = func() error {
		unix.SetfsuidRetUid(origUID)
		unix.SetfsgidRetGid(origGID)
		if err := unix.Setgroups(origGroups); err != nil {
			return err
		}
		if u, _ := unix.SetfsuidRetUid(-1); u != origUID {
			return fmt.Errorf("fsuid is %d, not %d", u, origUID)
		}
		if g, _ := unix.SetfsgidRetGid(-1); g != origGID {
			return fmt.Errorf("fsgid is %d, not %d", g, origGID)
		}
		return nil
	}
	groups := make([]int, len(id.groups))
	for i, g := range id.groups {
		groups[i] = int(g)
	}
	// x/sys's Setgroups is the raw per-thread system call, unlike
	// syscall.Setgroups, which changes every thread of the process.
	if err := unix.Setgroups(groups); err != nil {
		return restore, fmt.Errorf("%w: user: cannot take groups %v: %v", wire.ErrInvalid, id.groups, err)
	}
	// setfsuid and setfsgid report no errors: ask for the id back. An id
	// the sandbox's user namespace does not map is silently refused.
	unix.SetfsgidRetGid(int(id.gid))
	if g, _ := unix.SetfsgidRetGid(-1); g != int(id.gid) {
		return restore, fmt.Errorf("%w: user: gid %d is not usable in this sandbox (not mapped in its user namespace?)", wire.ErrInvalid, id.gid)
	}
	unix.SetfsuidRetUid(int(id.uid))
	if u, _ := unix.SetfsuidRetUid(-1); u != int(id.uid) {
		return restore, fmt.Errorf("%w: user: uid %d is not usable in this sandbox (not mapped in its user namespace?)", wire.ErrInvalid, id.uid)
	}
	return restore, nil
}

// lookupFileUser resolves a user spec against the sandbox's own
// /etc/passwd and /etc/group, which the init reads as root: their content
// is the sandbox's and is parsed as untrusted.
func lookupFileUser(spec string) (*fsIdentity, error) {
	if spec == "" {
		return nil, nil
	}
	if _, _, err := wire.ParseUserSpec(spec); err != nil {
		return nil, err
	}
	passwd, err := fsReadSmallFile("/etc/passwd", 4<<20)
	if err != nil {
		return nil, fmt.Errorf("user %q: %w", spec, err)
	}
	group, err := fsReadSmallFile("/etc/group", 4<<20)
	if err != nil {
		return nil, fmt.Errorf("user %q: %w", spec, err)
	}
	return fsResolveUser(spec, passwd, group)
}

// fsReadSmallFile reads a regular file of at most max bytes; a missing file
// reads as empty. Non-blocking open: a FIFO planted at the path must not
// hang the init.
func fsReadSmallFile(p string, max int64) ([]byte, error) {
	fd, err := fsOpen(unix.AT_FDCWD, p, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", p, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("stat %s: %w", p, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("%s is not a regular file", p)
	}
	if st.Size > max {
		return nil, fmt.Errorf("%s is larger than %d bytes", p, max)
	}
	buf := make([]byte, st.Size)
	n, err := fsPreadFull(fd, buf, 0)
	if err != nil && err != io.EOF {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	return buf[:n], nil
}

// fsPreadFull preads until buf is full or end of file (io.EOF).
func fsPreadFull(fd int, buf []byte, off int64) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := unix.Pread(fd, buf[n:], off+int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		if m == 0 {
			return n, io.EOF
		}
		n += m
	}
	return n, nil
}

// fsWriteAll writes p to fd, resuming short writes.
func fsWriteAll(fd int, p []byte) error {
	for len(p) > 0 {
		n, err := unix.Write(fd, p)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// fsHaveOpenat2 says whether openat2 can be used: the kernel may predate
// it (5.6) and a seccomp profile may refuse it, with ENOSYS or with EPERM,
// which an open could also fail with for reasons of its own, so ask once
// with an open that cannot fail otherwise.
var fsHaveOpenat2 = sync.OnceValue(func() bool {
	fd, err := unix.Openat2(unix.AT_FDCWD, "/", &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_MAGICLINKS})
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
})

// fsOpen opens p relative to dirfd. Magic links (/proc/PID/fd/N and the
// like, which lead to whatever the init has open) are never followed;
// ordinary symlinks are, except a final one when flags has O_NOFOLLOW.
// Without openat2 it falls back to openat, which follows magic links.
func fsOpen(dirfd int, p string, flags int, mode uint32, resolve uint64) (int, error) {
	flags |= unix.O_CLOEXEC
	if fsHaveOpenat2() {
		how := unix.OpenHow{Flags: uint64(flags), Resolve: resolve | unix.RESOLVE_NO_MAGICLINKS}
		if flags&unix.O_CREAT != 0 {
			how.Mode = uint64(mode)
		}
		for tries := 0; ; tries++ {
			fd, err := unix.Openat2(dirfd, p, &how)
			// EAGAIN: a concurrent rename made the kernel give up on a
			// lookup; it is worth a few retries, not a loop forever.
			if err == unix.EINTR || (err == unix.EAGAIN && tries < 8) {
				continue
			}
			return fd, err
		}
	}
	for {
		fd, err := unix.Openat(dirfd, p, flags, mode)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// fsOpenDir opens the directory dir for use as the dirfd of *at calls.
func fsOpenDir(dir string) (int, error) {
	return fsOpen(unix.AT_FDCWD, dir, unix.O_PATH|unix.O_DIRECTORY, 0, 0)
}

// fsStatFD describes an open file. name and path are what to report.
func fsStatFD(fd int, path, name string) (wire.FileStat, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return wire.FileStat{}, err
	}
	fi := fsStatOf(&st, path, name)
	if fi.Type == wire.FileTypeSymlink {
		fi.LinkTarget, _ = fsReadlink(fd, "")
	}
	return fi, nil
}

func fsStatOf(st *unix.Stat_t, path, name string) wire.FileStat {
	return wire.FileStat{
		Path:  path,
		Name:  name,
		Type:  fsType(st.Mode),
		Size:  st.Size,
		Mode:  st.Mode & 0o7777,
		UID:   st.Uid,
		GID:   st.Gid,
		Mtime: time.Unix(st.Mtim.Sec, st.Mtim.Nsec).UTC(),
	}
}

func fsType(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return wire.FileTypeDir
	case unix.S_IFLNK:
		return wire.FileTypeSymlink
	case unix.S_IFIFO:
		return wire.FileTypeFIFO
	case unix.S_IFSOCK:
		return wire.FileTypeSocket
	case unix.S_IFCHR:
		return wire.FileTypeChar
	case unix.S_IFBLK:
		return wire.FileTypeBlock
	}
	return wire.FileTypeRegular
}

// fsReadlink reads a symlink; with an empty name, the one fd (O_PATH,
// O_NOFOLLOW) refers to.
func fsReadlink(dirfd int, name string) (string, error) {
	for size := 256; size <= 1<<16; size *= 4 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(dirfd, name, buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
	return "", unix.ENAMETOOLONG
}

// fsErrorCode classifies an errno for the wire, with the words used in
// messages.
func fsErrorCode(errno unix.Errno) (code, text string) {
	switch errno {
	case unix.ENOENT:
		return wire.CodeNotFound, "no such file or directory"
	case unix.EACCES, unix.EPERM:
		return wire.CodePermissionDenied, "permission denied"
	case unix.EEXIST:
		return wire.CodeAlreadyExists, "already exists"
	case unix.ENOTEMPTY:
		return wire.CodeFailedPrecondition, "directory not empty"
	case unix.ENOTDIR:
		return wire.CodeFailedPrecondition, "a path component is not a directory"
	case unix.EISDIR:
		return wire.CodeFailedPrecondition, "is a directory"
	case unix.EROFS:
		return wire.CodeFailedPrecondition, "read-only file system"
	case unix.EBUSY, unix.ETXTBSY:
		return wire.CodeFailedPrecondition, errno.Error()
	case unix.EXDEV:
		return wire.CodeFailedPrecondition, "source and destination are on different file systems"
	case unix.ELOOP:
		return wire.CodeInvalidArgument, "too many levels of symbolic links (a symlink loop?)"
	case unix.ENAMETOOLONG:
		return wire.CodeInvalidArgument, "file name too long"
	case unix.EINVAL:
		return wire.CodeInvalidArgument, "invalid argument"
	case unix.ENOSPC, unix.EDQUOT:
		return wire.CodeResourceExhausted, "no space left on device"
	case unix.EFBIG:
		return wire.CodeResourceExhausted, "file too large (the sandbox's file size limit?)"
	case unix.EMFILE, unix.ENFILE, unix.ENOMEM:
		return wire.CodeResourceExhausted, errno.Error()
	}
	return wire.CodeInternal, errno.Error()
}

// fsFail turns an error of op on path into the error sent to the host.
func fsFail(op, path string, err error) *wire.RemoteError {
	var re *wire.RemoteError
	if errors.As(err, &re) {
		return re
	}
	var errno unix.Errno
	if errors.As(err, &errno) {
		code, text := fsErrorCode(errno)
		return &wire.RemoteError{Message: fmt.Sprintf("%s %s: %s", op, wire.QuotePath(path), text), Code: code}
	}
	r := wire.ToRemoteError(err)
	if errors.Is(err, wire.ErrInvalid) {
		// "invalid argument: path ..." reads better without the class.
		r.Message = strings.TrimPrefix(err.Error(), wire.ErrInvalid.Error()+": ")
	}
	if !strings.Contains(r.Message, wire.QuotePath(path)) && path != "" {
		r.Message = fmt.Sprintf("%s %s: %s", op, wire.QuotePath(path), r.Message)
	}
	return r
}

// fsNotFollowed is the error for a final symlink an operation refuses to
// follow.
func fsNotFollowed(op, path string) *wire.RemoteError {
	return &wire.RemoteError{
		Message: fmt.Sprintf("%s %s: is a symbolic link, which %s does not follow", op, wire.QuotePath(path), op),
		Code:    wire.CodeFailedPrecondition,
	}
}

// fsIsSymlinkAt reports whether dirfd/name is a symlink (not followed).
func fsIsSymlinkAt(dirfd int, name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK
}

// fileReadBufs holds FileChunk buffers, so streaming a file allocates
// nothing per chunk or per operation.
var fileReadBufs = sync.Pool{New: func() any { return new([wire.FileChunk]byte) }}

// fsPerm checks a mode from the host.
func fsPerm(field string, mode uint32) error {
	if mode&^0o7777 != 0 {
		return fmt.Errorf("%w: %s: %#o has bits beyond 07777", wire.ErrInvalid, field, mode)
	}
	return nil
}
