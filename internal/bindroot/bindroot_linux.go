// Package bindroot decides which host directories a caller may mount into
// a sandbox, and mounts them without a second look at their path.
//
// A bind is allowed only beneath a root the administrator named
// (boxd --allow-bind), and only if the caller can open the directory
// themselves: Open resolves it on a thread that carries the caller's
// uid, gid and groups as its filesystem credentials (setfsuid, setfsgid,
// setgroups on that thread alone, without host root's DAC capabilities),
// from the root's descriptor with openat2 RESOLVE_BENEATH: a symlink or
// ".." that leads out of the root is refused, whatever the tree holds.
// What the caller gets is that open directory: Mount clones the mount at
// the descriptor (open_tree, not recursive, so mounts beneath it stay
// out) and moves the clone to a target boxd owns (move_mount), so nothing
// resolves the caller's path again and a rename or a symlink swapped in
// after the check cannot redirect it.
//
// Anything refused is errdefs.ErrPermissionDenied naming the path. Host
// root's binds are refused too: a bind is mounted ID-mapped so that the
// sandbox's root acts as its caller on the host, and host root is never
// mapped into a sandbox.
package bindroot

import (
	"errors"
	"fmt"
	"os"
	"path"
	goruntime "runtime"
	"strings"
	"unsafe"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"
)

// Creds are the host credentials of the caller a bind is checked for.
type Creds struct {
	UID, GID uint32
	Groups   []uint32 // supplementary
}

// Bind is one parsed HOST:/PATH[:OPTIONS].
type Bind struct {
	Source   string // host directory
	Target   string // path in the sandbox
	ReadOnly bool
	NoExec   bool
}

// ParseRoot checks an allowed root: an absolute, clean path other than
// "/" naming a directory.
func ParseRoot(s string) (string, error) {
	if !path.IsAbs(s) || path.Clean(s) != s || s == "/" {
		return "", fmt.Errorf("%q: want an absolute, clean path other than /", s)
	}
	st, err := os.Stat(s)
	if err != nil {
		return "", err
	}
	if !st.IsDir() {
		return "", fmt.Errorf("%q is not a directory", s)
	}
	return s, nil
}

// Parse reads HOST:/PATH[:OPTIONS], OPTIONS a comma-separated list of
// ro, rw and noexec. It checks the form only; Open checks the host path.
func Parse(s string) (Bind, error) {
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return Bind{}, fmt.Errorf("%q: want HOST-PATH:/PATH[:ro][,noexec]", s)
	}
	b := Bind{Source: parts[0], Target: parts[1]}
	if len(parts) == 3 {
		seen := map[string]bool{}
		for _, o := range strings.Split(parts[2], ",") {
			switch {
			case seen[o]:
				return Bind{}, fmt.Errorf("%q: option %q given twice", s, o)
			case o == "ro":
				b.ReadOnly = true
			case o == "rw":
			case o == "noexec":
				b.NoExec = true
			default:
				return Bind{}, fmt.Errorf("%q: option %q: want ro, rw or noexec", s, o)
			}
			seen[o] = true
		}
		if seen["ro"] && seen["rw"] {
			return Bind{}, fmt.Errorf("%q: ro and rw exclude each other", s)
		}
	}
	if b.Source == "" {
		return Bind{}, fmt.Errorf("%q: the host path is empty", s)
	}
	return b, nil
}

// denied is the one error of a refused host path.
func denied(p, format string, args ...any) error {
	return fmt.Errorf("%q: %s: %w", p, fmt.Sprintf(format, args...), errdefs.ErrPermissionDenied)
}

// Under returns the root among roots that p is at or beneath, and p
// relative to it ("." for the root itself); "" if none.
func Under(roots []string, p string) (root, rel string) {
	for _, r := range roots {
		if p == r {
			return r, "."
		}
		if rest, ok := strings.CutPrefix(p, r+"/"); ok {
			return r, rest
		}
	}
	return "", ""
}

// Open opens host directory p for a bind by c: beneath one of roots and
// as c could open it. The file is a read-only descriptor of the
// directory, for Mount.
func Open(roots []string, c Creds, p string) (*os.File, error) {
	if c.UID == 0 {
		return nil, denied(p, "host root's files are never mapped into a sandbox: bind as the user who owns them")
	}
	if !path.IsAbs(p) || strings.IndexByte(p, 0) >= 0 {
		return nil, denied(p, "want an absolute path")
	}
	if path.Clean(p) != p || strings.Contains(p+"/", "/../") {
		return nil, denied(p, "want a clean path, without .. or //")
	}
	root, rel := Under(roots, p)
	if root == "" {
		return nil, denied(p, "not beneath a directory boxd allows binds from (--allow-bind)")
	}
	fd := -1
	err := asCaller(c, func() error {
		rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(rfd)
		fd, err = unix.Openat2(rfd, rel, &unix.OpenHow{
			Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC | unix.O_NOCTTY,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
		})
		return err
	})
	switch {
	case err == nil:
		return os.NewFile(uintptr(fd), p), nil
	case errors.Is(err, unix.EXDEV):
		return nil, denied(p, "it leads out of %s (through a symlink or ..)", root)
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return nil, denied(p, "uid %d cannot open it", c.UID)
	case errors.Is(err, unix.ENOENT):
		return nil, denied(p, "no such directory")
	case errors.Is(err, unix.ENOTDIR):
		return nil, denied(p, "not a directory")
	case errors.Is(err, unix.ELOOP):
		return nil, denied(p, "too many symlinks")
	}
	return nil, denied(p, "%v", err)
}

// asCaller runs f on a thread of its own whose filesystem credentials are
// c's. The thread is never given back: Go ends a locked thread when its
// goroutine returns, so no other goroutine ever runs with c's identity.
func asCaller(c Creds, f func() error) error {
	done := make(chan error, 1)
	go func() {
		goruntime.LockOSThread()
		if err := becomeThread(c); err != nil {
			done <- err
			return
		}
		done <- f()
	}()
	return <-done
}

// becomeThread gives the calling thread c's groups, fsgid and fsuid (raw
// system calls: the C library's and Go's own change every thread), and
// drops from it the capabilities that would let it past the modes.
func becomeThread(c Creds) error {
	groups := append([]uint32{}, c.Groups...)
	var gp unsafe.Pointer
	if len(groups) > 0 {
		gp = unsafe.Pointer(&groups[0])
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(groups)), uintptr(gp), 0); e != 0 {
		return fmt.Errorf("bindroot: setgroups: %w", e)
	}
	unix.RawSyscall(unix.SYS_SETFSGID, uintptr(c.GID), 0, 0)
	unix.RawSyscall(unix.SYS_SETFSUID, uintptr(c.UID), 0, 0)
	// Both calls report the previous id, never an error: read them back.
	const query = uintptr(^uint32(0))
	if r, _, _ := unix.RawSyscall(unix.SYS_SETFSGID, query, 0, 0); uint32(r) != c.GID {
		return fmt.Errorf("bindroot: setfsgid %d did not take", c.GID)
	}
	if r, _, _ := unix.RawSyscall(unix.SYS_SETFSUID, query, 0, 0); uint32(r) != c.UID {
		return fmt.Errorf("bindroot: setfsuid %d did not take", c.UID)
	}
	// The kernel clears these when fsuid leaves 0 (unless securebits say
	// otherwise); clear them here too, on this thread only.
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("bindroot: capget: %w", err)
	}
	for _, cp := range []uint{unix.CAP_DAC_OVERRIDE, unix.CAP_DAC_READ_SEARCH, unix.CAP_FOWNER, unix.CAP_SYS_ADMIN} {
		data[cp/32].Effective &^= 1 << (cp % 32)
	}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("bindroot: capset: %w", err)
	}
	return nil
}

// Mount mounts the directory dir (from Open) at target, an empty
// directory boxd owns, made if missing: a clone of the mount at dir
// (not recursive), nosuid and nodev, read-only and noexec on request.
// Nothing resolves dir's path again.
func Mount(dir *os.File, target string, ro, noexec bool) error {
	mfd, err := unix.OpenTree(int(dir.Fd()), "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH)
	if err != nil {
		return fmt.Errorf("bindroot: open_tree %s: %w", dir.Name(), err)
	}
	defer unix.Close(mfd)
	attr := uint64(unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV)
	if ro {
		attr |= unix.MOUNT_ATTR_RDONLY
	}
	if noexec {
		attr |= unix.MOUNT_ATTR_NOEXEC
	}
	if err := unix.MountSetattr(mfd, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Attr_set: attr}); err != nil {
		return fmt.Errorf("bindroot: mount_setattr %s: %w", dir.Name(), err)
	}
	if err := os.Mkdir(target, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("bindroot: %w", err)
	}
	if err := unix.MoveMount(mfd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("bindroot: move_mount %s to %s: %w", dir.Name(), target, err)
	}
	return nil
}

// Mounted reports whether something is mounted at target: its mount id
// differs from its parent directory's (a bind from the same filesystem
// keeps the device number, so that cannot tell).
func Mounted(target string) bool {
	var st, parent unix.Statx_t
	if unix.Statx(unix.AT_FDCWD, target, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &st) != nil ||
		unix.Statx(unix.AT_FDCWD, path.Dir(target), unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &parent) != nil {
		return false
	}
	return st.Mnt_id != parent.Mnt_id
}

// Unmount detaches what is mounted at target and removes the directory.
// rmdir, never a recursive remove: if the unmount failed, the caller's
// files stay untouched.
func Unmount(target string) error {
	for Mounted(target) {
		if err := unix.Unmount(target, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("bindroot: unmount %s: %w", target, err)
		}
	}
	if err := unix.Rmdir(target); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("bindroot: %w", err)
	}
	return nil
}
