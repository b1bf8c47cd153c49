//go:build linux

// Room: reconcile. The check of a sandbox's rootfs before an init starts
// on it again (restart, Start) or a commit reads it: nothing runc or the
// init resolves may have become a symlink or another kind of file.

package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/mount"
	"github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// rootfsPath is a path runc or the init resolves in a sandbox's rootfs when
// it starts, and what its last component must be there.
type rootfsPath struct {
	path string
	file bool // a regular file (a bind-mounted file); else a directory
}

// rootfsPaths lists what starting spec resolves in the rootfs itself: every
// mount destination, the process's binary and working directory, the
// init's workdir, and the user database runc reads as it sets the process's
// user (a FIFO there would block runc, and boxd's restart with it, for
// good). A path below an earlier mount's destination is left out:
// from that mount point down runc resolves in the fresh filesystem it just
// mounted there (the /dev tmpfs, procfs), which nothing in the sandbox has
// touched; the mount point itself is checked as that mount's destination.
func rootfsPaths(s *specs.Spec, workdir string) []rootfsPath {
	var out []rootfsPath
	seen := map[string]bool{}
	add := func(p string, file bool, mounts []specs.Mount) {
		p = path.Clean("/" + p)
		if p == "/" || seen[p] || coveredBy(p, mounts) {
			return
		}
		seen[p] = true
		out = append(out, rootfsPath{path: p, file: file})
	}
	for i, m := range s.Mounts {
		add(m.Destination, isFileBind(m), s.Mounts[:i])
	}
	if s.Process != nil {
		if len(s.Process.Args) > 0 && path.IsAbs(s.Process.Args[0]) {
			add(s.Process.Args[0], true, s.Mounts)
		}
		add(s.Process.Cwd, false, s.Mounts)
	}
	if workdir == "" {
		workdir = "/workspace" // boxd-init's default
	}
	add(workdir, false, s.Mounts)
	// runc opens these in the rootfs even for a numeric user (for HOME and
	// supplementary groups).
	for _, f := range []string{"/etc/passwd", "/etc/group"} {
		add(f, true, s.Mounts)
	}
	return out
}

// coveredBy reports whether one of mounts sits on a proper ancestor of p.
func coveredBy(p string, mounts []specs.Mount) bool {
	return slices.ContainsFunc(mounts, func(m specs.Mount) bool {
		d := path.Clean("/" + m.Destination)
		return d == "/" || strings.HasPrefix(p, d+"/")
	})
}

// isFileBind reports whether m bind-mounts a regular file (whose mount
// point runc makes a file, not a directory). Sources are boxd's own host
// paths.
func isFileBind(m specs.Mount) bool {
	if m.Type != "bind" && !slices.Contains(m.Options, "bind") && !slices.Contains(m.Options, "rbind") {
		return false
	}
	st, err := os.Stat(m.Source)
	return err == nil && st.Mode().IsRegular()
}

// checkRootfs looks at a dead sandbox's rootfs (its image under its
// writable layer, mounted read-only, nodev, nosuid, noexec in a private
// temporary directory) for anything that would make starting it again
// resolve somewhere other than where the spec says: a symlink, or a
// non-directory where a directory is expected, on any path rootfsPaths
// lists. The sandbox's root could have put one there (it can rename /.boxd,
// which holds the init's mount points, and replace it), and runc would then
// follow it while it mounts and execs. problem is empty when the rootfs is
// fine; err means the check itself could not be done.
func (m *Manager) checkRootfs(ctx context.Context, ctr client.Container) (problem string, err error) {
	info, err := ctr.Info(ctx)
	if err != nil {
		return "", fmt.Errorf("check rootfs: %w", err)
	}
	var rec record
	if err := json.Unmarshal([]byte(info.Labels[LabelSandbox]), &rec); err != nil {
		return "", fmt.Errorf("check rootfs: corrupt %s label: %w", LabelSandbox, err)
	}
	spec, err := ctr.Spec(ctx)
	if err != nil {
		return "", fmt.Errorf("check rootfs: spec: %w", err)
	}
	mounts, err := m.cfg.Client.SnapshotService(info.Snapshotter).Mounts(ctx, info.SnapshotKey)
	if err != nil {
		return "", fmt.Errorf("check rootfs: snapshot mounts: %w", err)
	}
	mounts = mount.RemoveIDMapOption(mounts)
	for i := range mounts {
		mounts[i].Options = append(slices.Clone(mounts[i].Options), "nodev", "nosuid", "noexec")
	}
	paths := rootfsPaths(spec, rec.Workdir)
	err = mount.WithReadonlyTempMount(ctx, mounts, func(root string) error {
		problem, err = checkTree(root, paths)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("check rootfs: %w", err)
	}
	return problem, nil
}

// checkTree walks each path from root one component at a time, never
// following a symlink and never leaving root (openat2 with
// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS from the parent's descriptor), and
// returns the first component that is not what it must be. A component that
// does not exist ends that path: runc creates the rest as it should.
func checkTree(root string, paths []rootfsPath) (string, error) {
	rootfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("open %s: %w", root, err)
	}
	defer unix.Close(rootfd)
	for _, p := range paths {
		if problem, err := checkPath(rootfd, p); problem != "" || err != nil {
			return problem, err
		}
	}
	return "", nil
}

func checkPath(rootfd int, p rootfsPath) (string, error) {
	names := strings.Split(strings.TrimPrefix(p.path, "/"), "/")
	dirfd := rootfd
	defer func() {
		if dirfd != rootfd {
			unix.Close(dirfd)
		}
	}()
	for i, name := range names {
		sofar := "/" + strings.Join(names[:i+1], "/")
		fd, err := unix.Openat2(dirfd, name, &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
		})
		switch {
		case errors.Is(err, unix.ENOENT):
			return "", nil
		case errors.Is(err, unix.ELOOP):
			return sofar + " is a symlink", nil
		case err != nil:
			return "", fmt.Errorf("%s: %w", sofar, err)
		}
		var st unix.Stat_t
		err = unix.Fstat(fd, &st)
		if dirfd != rootfd {
			unix.Close(dirfd)
		}
		dirfd = fd
		if err != nil {
			return "", fmt.Errorf("%s: %w", sofar, err)
		}
		kind := st.Mode & unix.S_IFMT
		last := i == len(names)-1
		switch {
		case kind == unix.S_IFLNK:
			return sofar + " is a symlink", nil
		case last && p.file && kind != unix.S_IFREG:
			return fmt.Sprintf("%s is a %s, not a regular file", sofar, kindName(kind)), nil
		case (!last || !p.file) && kind != unix.S_IFDIR:
			return fmt.Sprintf("%s is a %s, not a directory", sofar, kindName(kind)), nil
		}
	}
	return "", nil
}

func kindName(kind uint32) string {
	switch kind {
	case unix.S_IFREG:
		return "regular file"
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFLNK:
		return "symlink"
	case unix.S_IFIFO:
		return "fifo"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFCHR:
		return "character device"
	case unix.S_IFBLK:
		return "block device"
	}
	return fmt.Sprintf("file of type %#o", kind)
}
