package bindroot

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"
)

// tree makes ROOT/mine (uid 41001's, 0700, holding a file, a symlink to
// /etc and one to ..), ROOT/theirs (uid 41002's, 0700) and OUTSIDE next
// to ROOT. The uids need no user: the kernel checks numbers.
func tree(t *testing.T) (root, outside string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("needs root (chown, mounts)")
	}
	top := t.TempDir()
	for _, d := range []string{filepath.Dir(top), top} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	root, outside = filepath.Join(top, "root"), filepath.Join(top, "outside")
	for _, d := range []string{root, outside, filepath.Join(root, "mine", "sub"), filepath.Join(root, "theirs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(root, "mine", "f"), []byte("mine"), 0o600))
	must(os.Symlink("/etc", filepath.Join(root, "mine", "etc")))
	must(os.Symlink("../../outside", filepath.Join(root, "mine", "up")))
	must(os.Symlink("sub", filepath.Join(root, "mine", "inside")))
	must(os.Chown(filepath.Join(root, "mine"), 41001, 41001))
	must(os.Chmod(filepath.Join(root, "mine"), 0o700))
	must(os.Chown(filepath.Join(root, "mine", "sub"), 41001, 41001))
	must(os.Chown(filepath.Join(root, "theirs"), 41002, 41002))
	must(os.Chmod(filepath.Join(root, "theirs"), 0o700))
	return root, outside
}

func TestOpen(t *testing.T) {
	root, outside := tree(t)
	me := Creds{UID: 41001, GID: 41001}
	roots := []string{root}
	for _, p := range []string{root + "/mine", root + "/mine/sub", root + "/mine/inside"} {
		f, err := Open(roots, me, p)
		if err != nil {
			t.Errorf("open %s: %v", p, err)
			continue
		}
		f.Close()
	}
	cases := []struct {
		c    Creds
		p    string
		want string
	}{
		{me, root + "/theirs", "cannot open"},
		{Creds{UID: 41003, GID: 41003}, root + "/mine", "cannot open"},
		{me, root + "/mine/etc", "leads out"},
		{me, root + "/mine/up", "leads out"},
		{me, root + "/mine/../theirs", "clean path"},
		{me, root + "/mine/", "clean path"},
		{me, "mine", "absolute"},
		{me, outside, "not beneath"},
		{me, root + "x", "not beneath"},
		{me, root + "/mine/f", "not a directory"},
		{me, root + "/mine/none", "no such"},
		{Creds{}, root + "/mine", "host root"},
	}
	for _, c := range cases {
		f, err := Open(roots, c.c, c.p)
		if err == nil {
			f.Close()
			t.Errorf("open %s as %d: no error", c.p, c.c.UID)
			continue
		}
		if !errdefs.IsPermissionDenied(err) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.p) {
			t.Errorf("open %s as %d: %v, want permission denied naming it: %s", c.p, c.c.UID, err, c.want)
		}
	}
	// A group the caller is in opens what the group may.
	if err := os.Chown(filepath.Join(root, "theirs"), 41002, 41500); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(root, "theirs"), 0o750); err != nil {
		t.Fatal(err)
	}
	f, err := Open(roots, Creds{UID: 41001, GID: 41001, Groups: []uint32{41500}}, root+"/theirs")
	if err != nil {
		t.Errorf("open through a supplementary group: %v", err)
	} else {
		f.Close()
	}
}

// TestMountPinsTheDirectory: the mount is of the directory Open opened,
// even if its path is swapped for a symlink to /etc in between.
func TestMountPinsTheDirectory(t *testing.T) {
	root, _ := tree(t)
	f, err := Open([]string{root}, Creds{UID: 41001, GID: 41001}, root+"/mine")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := os.Rename(root+"/mine", root+"/moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", root+"/mine"); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "m")
	if err := Mount(f, target, true, true); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := Unmount(target); err != nil {
			t.Error(err)
		}
		if _, err := os.Stat(target); !os.IsNotExist(err) {
			t.Errorf("target left: %v", err)
		}
	}()
	if !Mounted(target) {
		t.Fatal("not mounted")
	}
	if b, err := os.ReadFile(target + "/f"); err != nil || string(b) != "mine" {
		t.Errorf("f through the mount: %q %v", b, err)
	}
	if err := os.WriteFile(target+"/g", nil, 0o600); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("write to a read-only bind: %v", err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(target, &st); err != nil || st.Flags&(unix.ST_NOSUID|unix.ST_NODEV|unix.ST_NOEXEC|unix.ST_RDONLY) != unix.ST_NOSUID|unix.ST_NODEV|unix.ST_NOEXEC|unix.ST_RDONLY {
		t.Errorf("mount flags %#x (%v), want nosuid, nodev, noexec, ro", st.Flags, err)
	}
}

func TestParse(t *testing.T) {
	good := map[string]Bind{
		"/a:/w":           {Source: "/a", Target: "/w"},
		"/a:/w:ro":        {Source: "/a", Target: "/w", ReadOnly: true},
		"/a:/w:ro,noexec": {Source: "/a", Target: "/w", ReadOnly: true, NoExec: true},
		"/a:/w:noexec":    {Source: "/a", Target: "/w", NoExec: true},
	}
	for s, want := range good {
		if got, err := Parse(s); err != nil || got != want {
			t.Errorf("%s: %+v %v", s, got, err)
		}
	}
	for _, s := range []string{"/a", "/a:/w:x", "/a:/w:ro,rw", "/a:/w:ro,ro", ":/w", "/a:/w:ro:x"} {
		if _, err := Parse(s); err == nil {
			t.Errorf("%s: no error", s)
		}
	}
}
