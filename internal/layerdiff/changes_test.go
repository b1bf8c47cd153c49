//go:build linux

package layerdiff

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

var testOpts = DiffOptions{MaxChanges: 1000, MaxScan: 100000, MaxFilePatch: 1 << 20, MaxPatch: 16 << 20, MaxCompare: 1 << 30}

// listing renders changes one a line: kind letter, path, and what the
// test wants to check.
func listing(r DiffResult) string {
	var b strings.Builder
	for _, c := range r.Changes {
		k := map[ChangeKind]string{Added: "A", Modified: "M", Deleted: "D"}[c.Kind]
		fmt.Fprintf(&b, "%s %q %o %d:%d", k, c.Path, c.Mode, c.UID, c.GID)
		if c.LinkTarget != "" {
			fmt.Fprintf(&b, " -> %s", c.LinkTarget)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// TestChanges: an image layer, a fork layer and a writable layer (in
// shifted ids) made by hand as overlayfs writes them; the listing since
// the image and since the fork layer is exact, and the walk never leaves
// the layers through a symlink.
func TestChanges(t *testing.T) {
	dir := t.TempDir()
	img, fork, up := filepath.Join(dir, "img"), filepath.Join(dir, "fork"), filepath.Join(dir, "up")
	for _, p := range []string{img + "/etc", img + "/usr/bin", img + "/old/sub", img + "/keep", fork + "/etc", up + "/etc", up + "/usr/bin", up + "/keep"} {
		must(t, os.MkdirAll(p, 0o755))
	}
	must(t, os.WriteFile(img+"/etc/passwd", []byte("root\n"), 0o644))
	must(t, os.WriteFile(img+"/etc/hosts", []byte("h\n"), 0o644))
	must(t, os.WriteFile(img+"/usr/bin/tool", []byte("bin"), 0o755))
	must(t, os.WriteFile(img+"/old/sub/f", []byte("x"), 0o644))
	must(t, os.WriteFile(img+"/keep/a", []byte("a"), 0o644))
	must(t, os.WriteFile(img+"/renamed", []byte("r"), 0o644))
	// The fork layer: hosts changed, a new file, unshifted ids.
	must(t, os.WriteFile(fork+"/etc/hosts", []byte("h2\n"), 0o644))
	must(t, os.WriteFile(fork+"/etc/forked", []byte("f\n"), 0o600))
	// The writable layer, in shifted ids: passwd changed, tool chmodded,
	// /old removed (a whiteout), /keep replaced (opaque), a rename, a
	// symlink out of the layer, a new directory and a new file.
	must(t, os.WriteFile(up+"/etc/passwd", []byte("root\nagent\n"), 0o644))
	must(t, os.WriteFile(up+"/usr/bin/tool", []byte("bin"), 0o700))
	must(t, unix.Mknod(up+"/old", unix.S_IFCHR, 0))
	must(t, unix.Setxattr(up+"/keep", opaqueXattr, []byte("y"), 0))
	must(t, os.WriteFile(up+"/keep/b", []byte("b"), 0o644))
	must(t, unix.Mknod(up+"/renamed", unix.S_IFCHR, 0))
	must(t, os.WriteFile(up+"/moved", []byte("r"), 0o644))
	must(t, os.Symlink("/", up+"/escape"))
	must(t, os.MkdirAll(up+"/new/deeper", 0o750))
	must(t, os.WriteFile(up+"/new/deeper/x\nname\xff", []byte("hi\n"), 0o644))
	must(t, filepath.Walk(up, func(p string, _ os.FileInfo, err error) error {
		must(t, err)
		return os.Lchown(p, 200000, 300000)
	}))
	must(t, os.Lchown(up+"/new/deeper", 201000, 301000))

	imgL, forkL := Layer{Dir: img}, Layer{Dir: fork}
	upL := Layer{Dir: up, Shift: shift}
	r, err := Changes(context.Background(), []Layer{imgL}, []Layer{upL, forkL, imgL}, testOpts)
	must(t, err)
	want := `A "/escape" 120777 0:0 -> /
A "/etc/forked" 100600 0:0
M "/etc/hosts" 100644 0:0
M "/etc/passwd" 100644 0:0
D "/keep/a" 100644 0:0
A "/keep/b" 100644 0:0
A "/moved" 100644 0:0
A "/new" 40750 0:0
A "/new/deeper" 40750 1000:1000
A "/new/deeper/x\nname\xff" 100644 0:0
D "/old" 40755 0:0
D "/renamed" 100644 0:0
M "/usr/bin/tool" 100700 0:0
`
	if got := listing(r); got != want {
		t.Errorf("since the image:\n%s\nwant:\n%s", got, want)
	}
	r, err = Changes(context.Background(), []Layer{forkL, imgL}, []Layer{upL, forkL, imgL}, testOpts)
	must(t, err)
	want = strings.ReplaceAll(want, "A \"/etc/forked\" 100600 0:0\nM \"/etc/hosts\" 100644 0:0\n", "")
	if got := listing(r); got != want {
		t.Errorf("since the fork:\n%s\nwant:\n%s", got, want)
	}
	r, err = Changes(context.Background(), []Layer{imgL}, []Layer{upL, forkL, imgL}, DiffOptions{MaxChanges: 3, MaxScan: 100, MaxFilePatch: 1 << 20, MaxPatch: 16 << 20})
	must(t, err)
	if len(r.Changes) != 3 || !r.Truncated {
		t.Errorf("with at most 3 changes: %d changes, truncated %v", len(r.Changes), r.Truncated)
	}
}

// TestChangesAgainstCommit: a commit's copy of the writable layer (times
// in whole seconds, ids unshifted) against the writable layer now: only
// what changed since is listed, a same-size rewrite included.
func TestChangesAgainstCommit(t *testing.T) {
	dir := t.TempDir()
	img, up, commit := filepath.Join(dir, "img"), filepath.Join(dir, "up"), filepath.Join(dir, "commit")
	for _, p := range []string{img, up, commit} {
		must(t, os.MkdirAll(p, 0o755))
	}
	must(t, os.WriteFile(img+"/base", []byte("base"), 0o644))
	must(t, os.WriteFile(up+"/same", []byte("same"), 0o644))
	must(t, os.WriteFile(up+"/rewritten", []byte("AAAA"), 0o644))
	must(t, os.WriteFile(up+"/gone", []byte("g"), 0o644))
	must(t, os.Symlink("t1", up+"/link"))
	_, err := CopyUpper(context.Background(), commit, up, Shift{}, CopyOptions{TarTimes: true})
	must(t, err)
	must(t, os.WriteFile(up+"/rewritten", []byte("BBBB"), 0o644))
	must(t, os.Remove(up+"/gone"))
	must(t, os.Remove(up+"/link"))
	must(t, os.Symlink("t2", up+"/link"))
	must(t, os.WriteFile(up+"/base", []byte("base2"), 0o644))

	r, err := Changes(context.Background(), []Layer{{Dir: commit}, {Dir: img}}, []Layer{{Dir: up}, {Dir: img}}, testOpts)
	must(t, err)
	want := `M "/base" 100644 0:0
D "/gone" 100644 0:0
M "/link" 120777 0:0 -> t2
M "/rewritten" 100644 0:0
`
	if got := listing(r); got != want {
		t.Errorf("since the commit:\n%s\nwant:\n%s", got, want)
	}
}

// TestChangesPatch: text files get a unified diff, binary ones are
// flagged, and the per-file and total limits cut with the flag set.
func TestChangesPatch(t *testing.T) {
	dir := t.TempDir()
	img, up := filepath.Join(dir, "img"), filepath.Join(dir, "up")
	must(t, os.MkdirAll(img, 0o755))
	must(t, os.MkdirAll(up, 0o755))
	must(t, os.WriteFile(img+"/t", []byte("one\ntwo\nthree\n"), 0o644))
	must(t, os.WriteFile(up+"/t", []byte("one\n2\nthree\n"), 0o644))
	must(t, os.WriteFile(up+"/bin", []byte("a\x00b"), 0o644))
	must(t, os.WriteFile(up+"/big", []byte(strings.Repeat("x\n", 600<<10)), 0o644))
	must(t, os.WriteFile(up+"/new", []byte("hello"), 0o644))
	must(t, os.WriteFile(up+"/q\"\n", []byte("q\n"), 0o644))
	opts := testOpts
	opts.Patch = true
	r, err := Changes(context.Background(), []Layer{{Dir: img}}, []Layer{{Dir: up}, {Dir: img}}, opts)
	must(t, err)
	got := map[string]Change{}
	for _, c := range r.Changes {
		got[c.Path] = c
	}
	if p := string(got["/t"].Patch); p != "--- a/t\n+++ b/t\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n" {
		t.Errorf("patch of /t: %q", p)
	}
	if p := string(got["/new"].Patch); p != "--- /dev/null\n+++ b/new\n@@ -0,0 +1,1 @@\n+hello\n\\ No newline at end of file\n" {
		t.Errorf("patch of /new: %q", p)
	}
	if p := string(got["/q\"\n"].Patch); !strings.HasPrefix(p, "--- /dev/null\n+++ \"b/q\\\"\\n\"\n") {
		t.Errorf("patch of a hostile name: %q", p)
	}
	if c := got["/bin"]; !c.Binary || c.Patch != nil {
		t.Errorf("/bin: binary %v, patch %q", c.Binary, c.Patch)
	}
	if c := got["/big"]; !c.PatchCut || c.Patch != nil || !r.PatchTruncated {
		t.Errorf("/big (1.2 MiB): cut %v, %d bytes of patch, truncated %v", c.PatchCut, len(c.Patch), r.PatchTruncated)
	}
	opts.MaxPatch = 40
	r, err = Changes(context.Background(), []Layer{{Dir: img}}, []Layer{{Dir: up}, {Dir: img}}, opts)
	must(t, err)
	total := 0
	for _, c := range r.Changes {
		total += len(c.Patch)
	}
	if total > 40 || !r.PatchTruncated {
		t.Errorf("with 40 bytes of patches allowed: %d bytes, truncated %v", total, r.PatchTruncated)
	}
}

// TestChangesBounded: a directory of 10,000 names stops the walk at
// MaxScan, with Truncated set, before it is read whole.
func TestChangesBounded(t *testing.T) {
	dir := t.TempDir()
	img, up := filepath.Join(dir, "img"), filepath.Join(dir, "up")
	must(t, os.MkdirAll(img, 0o755))
	must(t, os.MkdirAll(up+"/many", 0o755))
	for i := range 10000 {
		must(t, os.WriteFile(fmt.Sprintf("%s/many/f%d", up, i), nil, 0o644))
	}
	opts := testOpts
	opts.MaxScan = 5000
	r, err := Changes(context.Background(), []Layer{{Dir: img}}, []Layer{{Dir: up}, {Dir: img}}, opts)
	must(t, err)
	if !r.Truncated || r.Scanned > 5000+4096 || len(r.Changes) > 1 {
		t.Errorf("truncated %v after %d entries looked at, %d changes", r.Truncated, r.Scanned, len(r.Changes))
	}
}

// BenchmarkChanges: 1,000 changed files over an image layer of 50,000
// in 50 directories, the listing since the image (what the bench's diff
// row times through the API).
func BenchmarkChanges(b *testing.B) {
	dir := b.TempDir()
	img, up := filepath.Join(dir, "img"), filepath.Join(dir, "up")
	for d := range 50 {
		for _, root := range []string{img, up} {
			if err := os.MkdirAll(fmt.Sprintf("%s/data/%d", root, d), 0o755); err != nil {
				b.Fatal(err)
			}
		}
		for i := range 1000 {
			if err := os.WriteFile(fmt.Sprintf("%s/data/%d/f%d", img, d, i), []byte("line\n"), 0o644); err != nil {
				b.Fatal(err)
			}
			if i < 20 {
				if err := os.WriteFile(fmt.Sprintf("%s/data/%d/f%d", up, d, i), []byte("line\nchanged\n"), 0o644); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.ResetTimer()
	for b.Loop() {
		r, err := Changes(context.Background(), []Layer{{Dir: img}}, []Layer{{Dir: up}, {Dir: img}}, testOpts)
		if err != nil || len(r.Changes) != 1000 {
			b.Fatalf("%d changes, %v", len(r.Changes), err)
		}
	}
}
