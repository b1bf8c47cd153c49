//go:build linux

package safetar

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The host side of boxctl cp ID:/path/tree DIR extracts with
// Options{Top: "tree"}: the archive comes from the sandbox and names
// nothing on the host.

func withMode(e entry, mode int64) entry {
	e.mode = mode
	return e
}

// TestCopyOutRefusesHostileArchives feeds archives a hostile sandbox init
// could send and checks each is refused, with an error naming the entry,
// and that nothing is left in the destination: not the refused entry, not
// the ones before it (the new top-level directory is built under a
// temporary name and removed).
func TestCopyOutRefusesHostileArchives(t *testing.T) {
	dev := entry{name: "tree/null", typ: tar.TypeChar, mode: 0o666}
	fifo := entry{name: "tree/fifo", typ: tar.TypeFifo, mode: 0o666}
	tests := []struct {
		name, entry string // entry: the one the error must name
		archive     func(s sandbox) []byte
	}{
		{"second top-level entry", "other", func(sandbox) []byte {
			return buildTar(t, dir("tree/"), reg("tree/f", "x"), reg("other", "pwned"))
		}},
		{"another name", ".bashrc", func(sandbox) []byte { return buildTar(t, reg(".bashrc", "pwned")) }},
		{"another name, then the asked one", "authorized_keys", func(sandbox) []byte {
			return buildTar(t, reg("authorized_keys", "pwned"), dir("tree/"))
		}},
		{"archive root", "./", func(sandbox) []byte { return buildTar(t, dir("./"), dir("./tree/")) }},
		{"dotdot", "../x", func(sandbox) []byte { return buildTar(t, reg("../x", "pwned")) }},
		{"dotdot below the top", "tree/../../outside/secret", func(sandbox) []byte {
			return buildTar(t, dir("tree/"), reg("tree/../../outside/secret", "pwned"))
		}},
		{"absolute", "", func(s sandbox) []byte { return buildTar(t, reg(filepath.Join(s.outside, "secret"), "pwned")) }},
		{"symlink to /etc/passwd", "tree/pw", func(sandbox) []byte {
			return buildTar(t, dir("tree/"), reg("tree/f", "x"), symlink("tree/pw", "/etc/passwd"))
		}},
		{"symlink climbing out", "tree/sub/a", func(sandbox) []byte {
			return buildTar(t, dir("tree/"), dir("tree/sub/"), symlink("tree/sub/a", "../../../../root"))
		}},
		{"symlink to the destination", "tree/up", func(sandbox) []byte {
			return buildTar(t, dir("tree/"), symlink("tree/up", ".."))
		}},
		{"symlink with .. after a name", "tree/z", func(sandbox) []byte {
			// y -> .. is tree itself and is kept; z -> x/y/.. lexically
			// is tree/x, but through y it is the destination.
			return buildTar(t, dir("tree/"), dir("tree/x/"), symlink("tree/x/y", ".."), symlink("tree/z", "x/y/.."))
		}},
		{"top-level symlink", "tree", func(sandbox) []byte { return buildTar(t, symlink("tree", "elsewhere")) }},
		{"hard link outside", "tree/h", func(sandbox) []byte {
			return buildTar(t, dir("tree/"), hardlink("tree/h", "../outside/secret"))
		}},
		{"hard link absolute", "tree/h", func(s sandbox) []byte {
			return buildTar(t, dir("tree/"), hardlink("tree/h", filepath.Join(s.outside, "secret")))
		}},
		{"hard link to another name", "tree/h", func(sandbox) []byte {
			return buildTar(t, dir("tree/"), hardlink("tree/h", ".bashrc"))
		}},
		{"device node", "tree/null", func(sandbox) []byte { return buildTar(t, dir("tree/"), reg("tree/f", "x"), dev) }},
		{"fifo", "tree/fifo", func(sandbox) []byte { return buildTar(t, dir("tree/"), fifo) }},
	}
	for _, walk := range []bool{false, true} {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s/walk=%v", tt.name, walk), func(t *testing.T) {
				forceWalk(t, walk)
				s := newSandbox(t)
				bashrc := filepath.Join(s.dest, ".bashrc")
				must(t, os.WriteFile(bashrc, []byte("original"), 0o644))
				err := Extract(bytes.NewReader(tt.archive(s)), s.dest, Options{Top: "tree"})
				if err == nil {
					t.Fatal("hostile archive extracted without error")
				}
				t.Log(err)
				if !errors.Is(err, ErrUnsafe) {
					t.Errorf("err = %v, want ErrUnsafe", err)
				}
				if tt.entry != "" && !strings.Contains(err.Error(), fmt.Sprintf("entry %q", tt.entry)) {
					t.Errorf("error %q does not name entry %q", err, tt.entry)
				}
				s.checkOutside(t)
				if names := dirNames(t, s.dest); !slices.Equal(names, []string{".bashrc"}) {
					t.Errorf("destination after a refused archive holds %q, want only the host's .bashrc", names)
				}
				if b, _ := os.ReadFile(bashrc); string(b) != "original" {
					t.Errorf(".bashrc = %q", b)
				}
			})
		}
	}
}

// Into a top-level directory that exists: it and every directory in it
// keep their modes, whatever the archive says; new ones get the archive's;
// setuid and setgid go; a refused entry leaves what came before it, only
// under the top-level name.
func TestCopyOutIntoExistingDirectory(t *testing.T) {
	s := newSandbox(t)
	tree := filepath.Join(s.dest, "tree")
	must(t, os.Mkdir(tree, 0o700))
	must(t, os.Mkdir(filepath.Join(tree, "private"), 0o700))
	must(t, os.Chmod(tree, 0o700)) // past the umask
	must(t, os.Chmod(filepath.Join(tree, "private"), 0o700))
	must(t, os.WriteFile(filepath.Join(tree, "hostfile"), []byte("host"), 0o600))
	arch := buildTar(t,
		withMode(dir("tree/"), 0o777),
		withMode(dir("tree/private/"), 0o777),
		reg("tree/private/f", "data"),
		withMode(dir("tree/new/"), 0o2775),
		withMode(reg("tree/new/suid", "x"), 0o6755),
		symlink("tree/new/ok", "../private/f"),
		symlink("tree/here", "."),
		hardlink("tree/new/h", "tree/private/f"),
	)
	if err := Extract(bytes.NewReader(arch), s.dest, Options{Top: "tree"}); err != nil {
		t.Fatal(err)
	}
	mode := func(p string) fs.FileMode {
		t.Helper()
		fi, err := os.Lstat(filepath.Join(tree, p))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Mode()
	}
	for p, want := range map[string]fs.FileMode{
		".": fs.ModeDir | 0o700, "private": fs.ModeDir | 0o700, // existed: kept
		"new": fs.ModeDir | 0o775, "new/suid": 0o755, // created: archive's, less setgid/setuid
		"private/f": 0o644, "new/ok": fs.ModeSymlink | 0o777, "here": fs.ModeSymlink | 0o777,
	} {
		if got := mode(p); got != want {
			t.Errorf("%s: mode %v, want %v", p, got, want)
		}
	}
	if b, err := os.ReadFile(filepath.Join(tree, "new/ok")); err != nil || string(b) != "data" {
		t.Errorf("link inside the tree: %q %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(tree, "new/h")); err != nil || string(b) != "data" {
		t.Errorf("hard link to an extracted file: %q %v", b, err)
	}

	// A hard link to a file the host had there, not one the archive wrote:
	// refused; what came before it stays, all under tree.
	arch = buildTar(t, dir("tree/"), reg("tree/before", "b"), hardlink("tree/h2", "tree/hostfile"))
	err := Extract(bytes.NewReader(arch), s.dest, Options{Top: "tree"})
	if !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), `entry "tree/h2"`) {
		t.Fatalf("hard link to a host file: %v, want ErrUnsafe naming tree/h2", err)
	}
	if _, err := os.Lstat(filepath.Join(tree, "h2")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("h2 was created: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(tree, "before")); err != nil {
		t.Errorf("before: %v", err)
	}
	if got := mode("."); got != fs.ModeDir|0o700 {
		t.Errorf("tree: mode %v after a second copy", got)
	}
	s.checkOutside(t)
}

// With LinksSkipUnsafe, symlinks leading out are left out and reported;
// everything else is extracted.
func TestCopyOutSkipsUnsafeLinks(t *testing.T) {
	s := newSandbox(t)
	arch := buildTar(t, dir("tree/"), dir("tree/sub/"),
		symlink("tree/pw", "/etc/passwd"),
		symlink("tree/sub/a", "../../../../root"),
		symlink("tree/sub/in", "../f"),
		reg("tree/f", "x"))
	var skipped []string
	err := Extract(bytes.NewReader(arch), s.dest, Options{Top: "tree", Links: LinksSkipUnsafe,
		Skipped: func(name, target string) { skipped = append(skipped, name+" -> "+target) }})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"tree/pw -> /etc/passwd", "tree/sub/a -> ../../../../root"}; !slices.Equal(skipped, want) {
		t.Errorf("skipped %q, want %q", skipped, want)
	}
	for _, p := range []string{"tree/pw", "tree/sub/a"} {
		if _, err := os.Lstat(filepath.Join(s.dest, p)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s was created: %v", p, err)
		}
	}
	if l, err := os.Readlink(filepath.Join(s.dest, "tree/sub/in")); err != nil || l != "../f" {
		t.Errorf("tree/sub/in = %q, %v", l, err)
	}
}

// Rename writes the asked-for top-level name under a new name (DST that
// does not exist), and a new top-level directory appears only when the
// archive is complete.
func TestCopyOutRename(t *testing.T) {
	s := newSandbox(t)
	arch := buildTar(t, withMode(dir("tree/"), 0o750), reg("tree/f", "x"))
	if err := Extract(bytes.NewReader(arch), s.dest, Options{Top: "tree", Rename: "copy"}); err != nil {
		t.Fatal(err)
	}
	if names := dirNames(t, s.dest); !slices.Equal(names, []string{"copy"}) {
		t.Fatalf("dest holds %q, want copy", names)
	}
	if fi, err := os.Stat(filepath.Join(s.dest, "copy")); err != nil || fi.Mode().Perm() != 0o750 {
		t.Errorf("copy: %v %v, want mode 0750", fi, err)
	}
	// A stream that breaks off leaves nothing of a new directory.
	arch = buildTar(t, dir("tree/"), reg("tree/f", strings.Repeat("x", 5000)))
	if err := Extract(bytes.NewReader(arch[:2000]), s.dest, Options{Top: "tree", Rename: "copy2"}); err == nil {
		t.Fatal("truncated archive extracted without error")
	}
	if names := dirNames(t, s.dest); !slices.Equal(names, []string{"copy"}) {
		t.Fatalf("dest after a broken copy holds %q, want copy", names)
	}
}

func TestConfined(t *testing.T) {
	for _, tt := range []struct {
		link, target string
		want         bool
	}{
		{"t/a", "b", true}, {"t/a", ".", true}, {"t/a", "./b/c", true}, {"t/a", "..", false},
		{"t/s/a", "..", true}, {"t/s/a", "../x", true}, {"t/s/a", "../..", false},
		{"t/s/a", "../../t/x", false}, {"t/s/a", "/t/x", false}, {"t/a", "s/../b", false},
		{"t/s/a", "..//./b", true}, {"t", "t", false}, {"t", ".", false},
	} {
		if got := confined(strings.Split(tt.link, "/"), tt.target); got != tt.want {
			t.Errorf("confined(%s -> %s) = %v, want %v", tt.link, tt.target, got, tt.want)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
