//go:build linux

package layerdiff

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"
)

// TestCopyUpper: every kind of entry an upperdir holds is copied with
// ownership unshifted, modes (setuid too), times, the file capability
// made namespace-free, whiteouts and the opaque mark; hard links stay
// links, holes stay holes, symlinks are copied and never followed,
// sockets and other xattrs are left out.
func TestCopyUpper(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	must(t, os.MkdirAll(src+"/d/e", 0o755))
	must(t, os.Mkdir(dst, 0o755))
	must(t, os.Lchown(src+"/d", 200000, 300000))
	must(t, unix.Setxattr(src+"/d", "trusted.overlay.opaque", []byte("y"), 0))
	must(t, os.WriteFile(src+"/d/f", []byte("hello"), 0o644))
	must(t, os.Lchown(src+"/d/f", 201000, 301001))
	must(t, unix.Setxattr(src+"/d/f", "security.capability", []byte(capV3(200000, true)), 0))
	must(t, unix.Chmod(src+"/d/f", 0o4755)) // after: setting a capability clears setuid
	must(t, unix.Setxattr(src+"/d/f", "user.note", []byte("dropped"), 0))
	must(t, os.Link(src+"/d/f", src+"/d/e/again"))
	must(t, os.WriteFile(src+"/outside", []byte("o"), 0o600))
	must(t, os.Lchown(src+"/outside", 5, 5))
	must(t, os.Symlink("/etc", src+"/to-etc"))
	must(t, os.Lchown(src+"/to-etc", 200000, 300000))
	must(t, unix.Mknod(src+"/gone", unix.S_IFCHR, 0))
	must(t, unix.Mkfifo(src+"/pipe", 0o640))
	l, err := net.Listen("unix", src+"/sock")
	must(t, err)
	defer l.Close()
	// 1 GiB apparent, one byte of data in the middle.
	sp, err := os.Create(src + "/sparse")
	must(t, err)
	must(t, sp.Truncate(1<<30))
	_, err = sp.WriteAt([]byte("x"), 512<<20)
	must(t, err)
	must(t, sp.Close())
	mtime := time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.UTC)
	must(t, os.Chtimes(src+"/d/f", mtime, mtime))
	must(t, os.Chtimes(src+"/d", mtime, mtime))

	st, err := CopyUpper(context.Background(), dst, src, shift, CopyOptions{})
	must(t, err)
	if st.Bytes > 1<<20 {
		t.Errorf("copied %d bytes of data; the sparse file's hole was copied", st.Bytes)
	}

	owner := func(p string, uid, gid uint32) unix.Stat_t {
		t.Helper()
		var s unix.Stat_t
		must(t, unix.Lstat(filepath.Join(dst, p), &s))
		if s.Uid != uid || s.Gid != gid {
			t.Errorf("%s owned %d:%d, want %d:%d", p, s.Uid, s.Gid, uid, gid)
		}
		return s
	}
	if s := owner("d", 0, 0); s.Mode&0o7777 != 0o755 || s.Mtim != unix.NsecToTimespec(mtime.UnixNano()) {
		t.Errorf("d: mode %o mtime %v", s.Mode, s.Mtim)
	}
	v := make([]byte, 8)
	if n, err := unix.Getxattr(dst+"/d", "trusted.overlay.opaque", v); err != nil || string(v[:n]) != "y" {
		t.Errorf("d not opaque: %v", err)
	}
	f := owner("d/f", 1000, 1001)
	if f.Mode&0o7777 != 0o4755 || f.Mtim != unix.NsecToTimespec(mtime.UnixNano()) {
		t.Errorf("d/f: mode %o mtime %v", f.Mode, f.Mtim)
	}
	if b, _ := os.ReadFile(dst + "/d/f"); string(b) != "hello" {
		t.Errorf("d/f = %q", b)
	}
	c := make([]byte, 64)
	n, err := unix.Getxattr(dst+"/d/f", "security.capability", c)
	if err != nil || n != capV2Size || binary.LittleEndian.Uint32(c)&capRevMask != capRev2 {
		t.Errorf("d/f capability %x (%v), want v2", c[:max(n, 0)], err)
	}
	if _, err := unix.Getxattr(dst+"/d/f", "user.note", c); err != unix.ENODATA {
		t.Errorf("user.note: %v, want it dropped", err)
	}
	if a := owner("d/e/again", 1000, 1001); a.Ino != f.Ino || f.Nlink != 2 {
		t.Errorf("d/e/again is not a hard link of d/f (inodes %d, %d; links %d)", a.Ino, f.Ino, f.Nlink)
	}
	owner("outside", overflowID, overflowID)
	if s := owner("to-etc", 0, 0); s.Mode&unix.S_IFMT != unix.S_IFLNK {
		t.Errorf("to-etc is not a symlink: %o", s.Mode)
	}
	if tg, _ := os.Readlink(dst + "/to-etc"); tg != "/etc" {
		t.Errorf("to-etc -> %q", tg)
	}
	// Made by host root, outside the sandbox's ids: nobody's.
	if s := owner("gone", overflowID, overflowID); s.Mode&unix.S_IFMT != unix.S_IFCHR || s.Rdev != 0 {
		t.Errorf("gone is not a whiteout: %o %d", s.Mode, s.Rdev)
	}
	if s := owner("pipe", overflowID, overflowID); s.Mode&unix.S_IFMT != unix.S_IFIFO || s.Mode&0o777 != 0o640 {
		t.Errorf("pipe: %o", s.Mode)
	}
	if _, err := os.Lstat(dst + "/sock"); !os.IsNotExist(err) {
		t.Errorf("socket copied: %v", err)
	}
	s := owner("sparse", overflowID, overflowID)
	if s.Size != 1<<30 || s.Blocks*512 > 1<<20 {
		t.Errorf("sparse: size %d, %d bytes allocated", s.Size, s.Blocks*512)
	}
	b := make([]byte, 3)
	sf, err := os.Open(dst + "/sparse")
	must(t, err)
	_, err = sf.ReadAt(b, 512<<20-1)
	sf.Close()
	must(t, err)
	if !bytes.Equal(b, []byte{0, 'x', 0}) {
		t.Errorf("sparse data %q", b)
	}

	// TarTimes: whole seconds, as a layer tar carries them.
	dst2 := filepath.Join(dir, "dst2")
	must(t, os.Mkdir(dst2, 0o755))
	_, err = CopyUpper(context.Background(), dst2, src, shift, CopyOptions{TarTimes: true})
	must(t, err)
	var s2 unix.Stat_t
	must(t, unix.Lstat(dst2+"/d/f", &s2))
	if s2.Mtim.Nsec != 0 || s2.Mtim.Sec != mtime.Unix() || s2.Atim != s2.Mtim {
		t.Errorf("TarTimes: mtime %v atime %v", s2.Mtim, s2.Atim)
	}
}

// TestCopyUpperRefuses: a device node other than a whiteout (which sandbox
// root cannot make, so it means tampering) fails the copy as
// failed_precondition naming it; so does a tree nested too deep.
func TestCopyUpperRefuses(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	must(t, os.MkdirAll(src+"/dev", 0o755))
	must(t, os.Mkdir(dst, 0o755))
	must(t, unix.Mknod(src+"/dev/null", unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
	_, err := CopyUpper(context.Background(), dst, src, shift, CopyOptions{})
	if !errdefs.IsFailedPrecondition(err) || !bytes.Contains([]byte(err.Error()), []byte("dev/null")) {
		t.Errorf("a device node: %v, want failed_precondition naming dev/null", err)
	}

	deep, dst3 := filepath.Join(dir, "deep"), filepath.Join(dir, "dst3")
	must(t, os.Mkdir(deep, 0o755))
	must(t, os.Mkdir(dst3, 0o755))
	fd, err := unix.Open(deep, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	must(t, err)
	for range MaxCopyDepth + 1 {
		must(t, unix.Mkdirat(fd, "a", 0o755))
		nfd, err := unix.Openat(fd, "a", unix.O_RDONLY|unix.O_DIRECTORY, 0)
		must(t, err)
		unix.Close(fd)
		fd = nfd
	}
	unix.Close(fd)
	_, err = CopyUpper(context.Background(), dst3, deep, shift, CopyOptions{})
	if !errdefs.IsFailedPrecondition(err) {
		t.Errorf("a tree %d deep: %v, want failed_precondition", MaxCopyDepth+1, err)
	}
}
