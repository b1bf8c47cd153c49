//go:build linux

package e2e

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestCopyOutHostileTree: sandbox root builds a tree meant to hurt whoever
// copies it out (symlinks to /etc/passwd and up out of the tree, odd and
// setuid modes, a directory named like one the host already has, private),
// and the host copies it with boxctl cp. Only names under HOSTDIR/tree are
// written, the host's directory keeps its mode, links leading out fail the
// copy (or are left out with --safe-links), links within the tree are kept.
func TestCopyOutHostileTree(t *testing.T) {
	id := newSandbox(t)
	if got := sh(t, id, "id -u"); got != "0\n" {
		t.Fatalf("exec runs as uid %q, want sandbox root", got)
	}
	sh(t, id, `set -e
		mkdir -p /workspace/tree/sub /workspace/tree/odd /workspace/tree/private
		echo data > /workspace/tree/f
		chmod 6755 /workspace/tree/f
		chmod 0777 /workspace/tree/private
		chmod 2757 /workspace/tree/odd
		ln -s /etc/passwd /workspace/tree/pw
		ln -s ../../../../root /workspace/tree/sub/up
		ln -s ../f /workspace/tree/sub/in`)

	host := filepath.Join(t.TempDir(), "host")
	private := filepath.Join(host, "tree", "private")
	must(t, os.MkdirAll(private, 0o755))
	must(t, os.Chmod(private, 0o700))
	must(t, os.Chmod(filepath.Dir(private), 0o750))
	must(t, os.WriteFile(filepath.Join(private, "key"), []byte("host key"), 0o600))
	must(t, os.WriteFile(filepath.Join(host, ".bashrc"), []byte("original"), 0o644))

	// What the host holds: every path under host, with mode and link.
	list := func() []string {
		t.Helper()
		var out []string
		err := filepath.WalkDir(host, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(host, p)
			desc := rel + " " + fi.Mode().String()
			if fi.Mode()&fs.ModeSymlink != 0 {
				l, _ := os.Readlink(p)
				desc += " -> " + l
			}
			out = append(out, desc)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	before := list()

	// By default the first link leading out fails the copy, naming it and
	// the flag. The entries before it (sorted: f, odd, private) are
	// written, only under tree; the host's private keeps 0700.
	_, stderr, code := boxctlRun("cp", id+":/workspace/tree", host)
	if code != 1 || !strings.Contains(stderr, `entry "tree/pw"`) || !strings.Contains(stderr, `symlink to "/etc/passwd" points outside the copied tree "tree"`) ||
		!strings.Contains(stderr, "--safe-links") {
		t.Errorf("cp of a tree with a link to /etc/passwd: exit %d, stderr %q; want 1, naming tree/pw and --safe-links", code, stderr)
	}
	afterRefused := list()
	wantRefused := slices.Concat(before, []string{"tree/f -rwxr-xr-x", "tree/odd drwxr-xrwx"})
	slices.Sort(wantRefused)
	slices.Sort(afterRefused)
	if !slices.Equal(afterRefused, wantRefused) {
		t.Errorf("host after the refused copy:\n%s\nwant\n%s", strings.Join(afterRefused, "\n"), strings.Join(wantRefused, "\n"))
	}

	// --safe-links: the links leading out are left out, with a warning
	// each; the one within the tree is kept.
	_, stderr, code = boxctlRun("cp", "--safe-links", id+":/workspace/tree", host)
	if code != 0 || !strings.Contains(stderr, `left out symlink "tree/pw" -> "/etc/passwd"`) ||
		!strings.Contains(stderr, `left out symlink "tree/sub/up" -> "../../../../root"`) {
		t.Errorf("cp --safe-links: exit %d, stderr %q; want 0 and a warning per link left out", code, stderr)
	}
	got := list()
	want := slices.Concat(wantRefused, []string{"tree/sub drwxr-xr-x", "tree/sub/in Lrwxrwxrwx -> ../f"})
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("host after cp --safe-links:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if b, err := os.ReadFile(filepath.Join(host, "tree", "sub", "in")); err != nil || string(b) != "data\n" {
		t.Errorf("tree/sub/in reads %q, %v", b, err)
	}

	// To a new name, refused: nothing of it is left.
	_, stderr, code = boxctlRun("cp", id+":/workspace/tree", filepath.Join(host, "fresh"))
	if code != 1 || !strings.Contains(stderr, `entry "tree/pw"`) {
		t.Errorf("cp to a new name: exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Lstat(filepath.Join(host, "fresh")); err == nil {
		t.Errorf("a refused copy to a new name left %s", filepath.Join(host, "fresh"))
	}
	if got := list(); !slices.Equal(got, want) {
		t.Errorf("host after the refused copy to a new name:\n%s", strings.Join(got, "\n"))
	}
}
