//go:build linux

package safetar

import (
	"errors"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// noOpenat2 is set once openat2 turns out to be missing (old kernel) or
// blocked (seccomp); from then on directories are walked one component at a
// time, which gives the same guarantees with more syscalls.
var noOpenat2 atomic.Bool

// openDir opens the directory root/comps... for use as a dirfd, refusing to
// traverse any symlink. With create, missing directories are made (0755,
// as tar does for parents the archive does not list). The caller closes the
// returned fd, which is root itself (not to be closed) when comps is empty.
func openDir(root int, comps []string, create bool) (int, error) {
	if len(comps) == 0 {
		return root, nil
	}
	if !noOpenat2.Load() {
		fd, err := openat2Dir(root, strings.Join(comps, "/"))
		switch {
		case err == nil:
			return fd, nil
		case errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM):
			noOpenat2.Store(true)
		case errors.Is(err, unix.ENOENT) && create:
			// Fall through to the walk, which creates what is missing.
		default:
			return -1, resolveError(err)
		}
	}
	return walkDir(root, comps, create)
}

func openat2Dir(root int, path string) (int, error) {
	how := unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}
	for {
		fd, err := unix.Openat2(root, path, &how)
		// EAGAIN: a concurrent rename raced the lookup; the kernel asks
		// us to retry. EINTR likewise.
		if err == unix.EAGAIN || err == unix.EINTR {
			continue
		}
		return fd, err
	}
}

// walkDir opens each component with O_NOFOLLOW. Components never contain
// "/" or "..", so each step stays directly beneath the previous one.
func walkDir(root int, comps []string, create bool) (int, error) {
	fd := root
	for _, c := range comps {
		next, err := openNoFollowDir(fd, c)
		if err == unix.ENOENT && create {
			if err = unix.Mkdirat(fd, c, 0o755); err == nil || err == unix.EEXIST {
				next, err = openNoFollowDir(fd, c)
			}
		}
		if err == unix.ENOTDIR && isSymlink(fd, c) {
			// O_NOFOLLOW|O_DIRECTORY reports a symlink as ENOTDIR.
			err = unix.ELOOP
		}
		if fd != root {
			unix.Close(fd)
		}
		if err != nil {
			return -1, resolveError(err)
		}
		fd = next
	}
	return fd, nil
}

func isSymlink(dirfd int, name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK
}

func openNoFollowDir(dirfd int, name string) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == unix.EINTR {
			continue
		}
		return fd, err
	}
}

// resolveError turns the errors that mean "a symlink is in the way" into
// ErrUnsafe so callers can tell hostile archives from I/O trouble.
func resolveError(err error) error {
	switch {
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.EXDEV):
		return unsafef("path goes through a symlink")
	case errors.Is(err, unix.ENOTDIR):
		return unsafef("a parent is not a directory")
	}
	return err
}
