//go:build linux

package safetar

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// entry is a tar entry for building test archives.
type entry struct {
	name, link string
	typ        byte
	mode       int64
	body       string
}

func reg(name, body string) entry {
	return entry{name: name, typ: tar.TypeReg, mode: 0o644, body: body}
}
func dir(name string) entry             { return entry{name: name, typ: tar.TypeDir, mode: 0o755} }
func symlink(name, target string) entry { return entry{name: name, typ: tar.TypeSymlink, link: target} }
func hardlink(name, target string) entry {
	return entry{name: name, typ: tar.TypeLink, link: target}
}

func buildTar(t testing.TB, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: e.mode,
			Size: int64(len(e.body)), ModTime: time.Unix(1700000000, 0)}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatalf("header %q: %v", e.name, err)
		}
		io.WriteString(tw, e.body)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// rawTar builds an archive whose single header has name written verbatim,
// for names archive/tar's writer refuses to produce.
func rawTar(name string, typ byte) []byte {
	return append(rawEntry(name, typ, nil), make([]byte, 1024)...)
}

// rawEntry is one ustar header block plus body, padded, without trailer.
func rawEntry(name string, typ byte, body []byte) []byte {
	blk := make([]byte, 512)
	copy(blk[0:100], name)
	copy(blk[100:], "0000644\x00")
	copy(blk[108:], "0000000\x00")
	copy(blk[116:], "0000000\x00")
	copy(blk[124:], fmt.Sprintf("%011o\x00", len(body)))
	copy(blk[136:], "00000000000\x00")
	blk[156] = typ
	copy(blk[257:], "ustar\x0000")
	fixChecksum(blk)
	padded := make([]byte, (len(body)+511)/512*512)
	copy(padded, body)
	return append(blk, padded...)
}

// paxTar builds an archive with a raw PAX "path" record, which can carry
// bytes (like NUL) that archive/tar's writer validates away.
func paxTar(path string) []byte {
	return paxTarRecords([][2]string{{"path", path}}, nil)
}

// paxTarRecords builds a PAX header with the given records, written
// verbatim, followed by one regular file with the given body.
func paxTarRecords(records [][2]string, body []byte) []byte {
	var recs []byte
	for _, kv := range records {
		rec := " " + kv[0] + "=" + kv[1] + "\n"
		n := len(rec)
		for {
			l := len(strconv.Itoa(n)) + len(rec)
			if l == n {
				break
			}
			n = l
		}
		recs = append(recs, strconv.Itoa(n)+rec...)
	}
	out := rawEntry("PaxHeaders/x", tar.TypeXHeader, recs)
	out = append(out, rawEntry("placeholder", tar.TypeReg, body)...)
	return append(out, make([]byte, 1024)...)
}

func fixChecksum(blk []byte) {
	copy(blk[148:156], "        ")
	sum := 0
	for _, b := range blk {
		sum += int(b)
	}
	copy(blk[148:], fmt.Sprintf("%06o\x00 ", sum))
}

// sandbox is a scratch area with the extraction directory "dest" and a
// sentinel file outside it that hostile archives try to reach.
type sandbox struct {
	base, dest, outside string
}

func newSandbox(t testing.TB) sandbox {
	base := t.TempDir()
	s := sandbox{base: base, dest: filepath.Join(base, "dest"), outside: filepath.Join(base, "outside")}
	if err := os.Mkdir(s.dest, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(s.outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.outside, "secret"), []byte("original"), 0o644); err != nil {
		t.Fatal(err)
	}
	return s
}

// checkOutside fails if anything outside dest changed.
func (s sandbox) checkOutside(t testing.TB) {
	t.Helper()
	names, _ := os.ReadDir(s.base)
	if len(names) != 2 {
		t.Fatalf("entries beside dest: %v", names)
	}
	out, _ := os.ReadDir(s.outside)
	b, err := os.ReadFile(filepath.Join(s.outside, "secret"))
	if len(out) != 1 || err != nil || string(b) != "original" {
		t.Fatalf("outside dir changed: %v %q %v", out, b, err)
	}
}

func TestExtractRejectsHostile(t *testing.T) {
	// Each test writes symlinks pointing at the sandbox's outside dir.
	tests := []struct {
		name    string
		archive func(s sandbox) []byte
		unsafe  bool // want ErrUnsafe specifically
	}{
		{"dotdot", func(s sandbox) []byte { return buildTar(t, reg("../outside/secret", "pwned")) }, true},
		{"dotdot inside", func(s sandbox) []byte { return buildTar(t, dir("a/"), reg("a/../../outside/secret", "pwned")) }, true},
		{"absolute", func(s sandbox) []byte { return buildTar(t, reg(filepath.Join(s.outside, "secret"), "pwned")) }, true},
		{"symlink then write through it", func(s sandbox) []byte {
			return buildTar(t, dir("a/"), symlink("a/l", s.outside), reg("a/l/secret", "pwned"))
		}, true},
		{"top-level symlink then write", func(s sandbox) []byte {
			return buildTar(t, symlink("a", s.outside), reg("a/secret", "pwned"))
		}, true},
		{"relative symlink escape", func(s sandbox) []byte {
			return buildTar(t, dir("a/"), symlink("a/l", "../../outside"), reg("a/l/secret", "pwned"))
		}, true},
		{"symlink then mkdir under it", func(s sandbox) []byte {
			return buildTar(t, dir("a/"), symlink("a/l", s.outside), dir("a/l/new/"))
		}, true},
		{"symlink loop", func(s sandbox) []byte {
			return buildTar(t, dir("a/"), symlink("a/x", "y"), symlink("a/y", "x"), reg("a/x/f", "data"))
		}, true},
		{"self loop", func(s sandbox) []byte {
			return buildTar(t, dir("a/"), symlink("a/x", "x"), reg("a/x/f", "data"))
		}, true},
		{"hard link outside", func(s sandbox) []byte {
			return buildTar(t, dir("a/"), hardlink("a/h", "../outside/secret"))
		}, true},
		{"hard link absolute", func(s sandbox) []byte {
			return buildTar(t, dir("a/"), hardlink("a/h", filepath.Join(s.outside, "secret")))
		}, true},
		{"hard link through symlink", func(s sandbox) []byte {
			return buildTar(t, dir("a/"), symlink("a/l", s.outside), hardlink("a/h", "a/l/secret"))
		}, true},
		{"hard link other top-level", func(s sandbox) []byte {
			return buildTar(t, dir("a/"), hardlink("a/h", "b/x"))
		}, true},
		{"two top-level names", func(s sandbox) []byte { return buildTar(t, reg("a", "1"), reg("b", "2")) }, true},
		{"overlong name", func(s sandbox) []byte {
			return buildTar(t, reg("a/"+strings.Repeat("x/", MaxNameLen/2)+"f", "x"))
		}, true},
		{"overlong symlink target", func(s sandbox) []byte {
			return buildTar(t, symlink("a", strings.Repeat("x", MaxNameLen+1)))
		}, true},
		{"NUL in PAX path", func(s sandbox) []byte { return paxTar("a\x00/../../outside/secret") }, false},
		{"PAX sparse", func(s sandbox) []byte {
			// Claims a 1 TB file made of holes: a disk bomb in 2 kB.
			// (PAX sparse 1.0, as GNU tar --sparse writes it: the map of
			// data fragments leads the entry's data.)
			return paxTarRecords([][2]string{{"GNU.sparse.major", "1"}, {"GNU.sparse.minor", "0"},
				{"GNU.sparse.name", "a"}, {"GNU.sparse.realsize", "1000000000000"}},
				sparseMap("1\n1000000000000\n0\n"))
		}, true},
		{"GNU sparse", func(s sandbox) []byte { return rawTar("a", tar.TypeGNUSparse) }, false},
		{"empty name", func(s sandbox) []byte { return rawTar("", tar.TypeReg) }, false},
		{"write through dangling symlink parent", func(s sandbox) []byte {
			return buildTar(t, dir("a/"), symlink("a/l", filepath.Join(s.outside, "newdir")), reg("a/l/f", "pwned"))
		}, true},
		{"unsupported type", func(s sandbox) []byte {
			return buildTar(t, entry{name: "a", typ: 'Z', mode: 0o644})
		}, true},
	}
	// LinksKeep lets the symlinks in, to show that the walk refuses to go
	// through them even then.
	for _, walk := range []bool{false, true} {
		for _, links := range []LinkPolicy{LinksRefuse, LinksKeep} {
			for _, tt := range tests {
				t.Run(fmt.Sprintf("%s/walk=%v/links=%d", tt.name, walk, links), func(t *testing.T) {
					forceWalk(t, walk)
					s := newSandbox(t)
					err := Extract(bytes.NewReader(tt.archive(s)), s.dest, Options{Links: links})
					if err == nil {
						t.Fatal("hostile archive extracted without error")
					}
					t.Log(err)
					if tt.unsafe && !errors.Is(err, ErrUnsafe) {
						t.Fatalf("err = %v, want ErrUnsafe", err)
					}
					if !strings.Contains(err.Error(), "safetar:") {
						t.Fatalf("error lacks context: %v", err)
					}
					s.checkOutside(t)
				})
			}
		}
	}
}

// forceWalk makes openDir skip openat2, to test the fallback used where
// seccomp or an old kernel refuse it.
func forceWalk(t testing.TB, walk bool) {
	old := noOpenat2.Load()
	noOpenat2.Store(walk)
	t.Cleanup(func() { noOpenat2.Store(old) })
}

func TestExtractErrorNamesEntry(t *testing.T) {
	s := newSandbox(t)
	err := Extract(bytes.NewReader(buildTar(t, dir("top/"), reg("top/../../evil", "x"))), s.dest, Options{})
	if err == nil || !strings.Contains(err.Error(), `"top/../../evil"`) {
		t.Fatalf("error %v does not name the entry", err)
	}
}

func TestExtractReplacesInsteadOfWritingThrough(t *testing.T) {
	for _, walk := range []bool{false, true} {
		t.Run(fmt.Sprintf("walk=%v", walk), func(t *testing.T) {
			forceWalk(t, walk)
			s := newSandbox(t)
			secret := filepath.Join(s.outside, "secret")
			// A symlink, then a file of the same name: the file replaces the
			// link rather than being written to the link's target.
			arch := buildTar(t, dir("a/"), symlink("a/f", secret), reg("a/f", "new"))
			if err := Extract(bytes.NewReader(arch), s.dest, Options{Links: LinksKeep}); err != nil {
				t.Fatal(err)
			}
			s.checkOutside(t)
			fi, err := os.Lstat(filepath.Join(s.dest, "a/f"))
			if err != nil || !fi.Mode().IsRegular() {
				t.Fatalf("a/f: %v %v", fi, err)
			}
			// A pre-existing hard link in dest to a file outside: replaced,
			// not written through.
			if err := os.Link(secret, filepath.Join(s.dest, "a/h")); err != nil {
				t.Fatal(err)
			}
			if err := Extract(bytes.NewReader(buildTar(t, reg("a/h", "pwned"))), s.dest, Options{}); err != nil {
				t.Fatal(err)
			}
			s.checkOutside(t)
		})
	}
}

func TestExtractModes(t *testing.T) {
	s := newSandbox(t)
	suid := reg("top/suid", "x")
	suid.mode = 0o6755
	ro := dir("top/ro/")
	ro.mode = 0o555
	sticky := dir("top/tmp/")
	sticky.mode = 0o1777
	dev := entry{name: "top/dev", typ: tar.TypeChar, mode: 0o666}
	fifo := entry{name: "top/fifo", typ: tar.TypeFifo, mode: 0o666}
	arch := buildTar(t, dir("top/"), suid, ro, reg("top/ro/inside", "y"), sticky, dev, fifo, reg("top/deep/parents/f", "z"))
	if err := Extract(bytes.NewReader(arch), s.dest, Options{SkipDevices: true}); err != nil {
		t.Fatal(err)
	}
	mode := func(p string) fs.FileMode {
		fi, err := os.Lstat(filepath.Join(s.dest, p))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Mode()
	}
	if m := mode("top/suid"); m != 0o755 {
		t.Errorf("suid file mode %v, want setuid/setgid stripped", m)
	}
	if m := mode("top/ro"); m.Perm() != 0o555 {
		t.Errorf("read-only dir mode %v", m)
	}
	if m := mode("top/tmp"); m&fs.ModeSticky == 0 || m.Perm() != 0o777 {
		t.Errorf("sticky dir mode %v", m)
	}
	if b, _ := os.ReadFile(filepath.Join(s.dest, "top/ro/inside")); string(b) != "y" {
		t.Errorf("file in read-only dir: %q", b)
	}
	for _, p := range []string{"top/dev", "top/fifo"} {
		if _, err := os.Lstat(filepath.Join(s.dest, p)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s was created: %v", p, err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(s.dest, "top/deep/parents/f")); string(b) != "z" {
		t.Errorf("implicit parents: %q", b)
	}
}

func TestExtractRename(t *testing.T) {
	s := newSandbox(t)
	arch := buildTar(t, dir("src/"), reg("src/f", "1"), hardlink("src/h", "src/f"), symlink("src/l", "f"))
	if err := Extract(bytes.NewReader(arch), s.dest, Options{Rename: "renamed"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"renamed/f", "renamed/h", "renamed/l"} {
		if b, err := os.ReadFile(filepath.Join(s.dest, p)); err != nil || string(b) != "1" {
			t.Errorf("%s: %q %v", p, b, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(s.dest, "src")); err == nil {
		t.Error("original top-level name was created")
	}
	for _, bad := range []string{"a/b", "..", ".", "x\x00"} {
		if err := Extract(bytes.NewReader(arch), s.dest, Options{Rename: bad}); err == nil {
			t.Errorf("rename %q accepted", bad)
		}
	}
}

func TestExtractRootEntrySkipped(t *testing.T) {
	s := newSandbox(t)
	if err := Extract(bytes.NewReader(buildTar(t, dir("./"), dir("./a/"), reg("./a/f", "x"))), s.dest, Options{}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(s.dest, "a/f")); string(b) != "x" {
		t.Fatalf("got %q", b)
	}
}

func TestExtractMissingDest(t *testing.T) {
	err := Extract(bytes.NewReader(buildTar(t, reg("a", "x"))), filepath.Join(t.TempDir(), "nope"), Options{})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v, want not exist", err)
	}
}

func TestExtractTruncatedStream(t *testing.T) {
	s := newSandbox(t)
	arch := buildTar(t, reg("a", strings.Repeat("x", 5000)))
	if err := Extract(bytes.NewReader(arch[:1500]), s.dest, Options{}); err == nil {
		t.Fatal("truncated archive extracted without error")
	}
}

// A file whose copy fails part way, here a stream that ends early, leaves
// the file it was to replace as it was and no partial file behind; one
// whose copy succeeds replaces it.
func TestExtractFailedFileKeepsTheOldOne(t *testing.T) {
	s := newSandbox(t)
	old := filepath.Join(s.dest, "a")
	if err := os.WriteFile(old, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	arch := buildTar(t, reg("a", strings.Repeat("x", 5000)))
	if err := Extract(bytes.NewReader(arch[:1500]), s.dest, Options{}); err == nil {
		t.Fatal("truncated archive extracted without error")
	}
	if b, err := os.ReadFile(old); err != nil || string(b) != "old" {
		t.Errorf("a after a failed copy: %q, %v; want the old content", b, err)
	}
	if names := dirNames(t, s.dest); !slices.Equal(names, []string{"a"}) {
		t.Errorf("dest after a failed copy holds %q, want just a", names)
	}
	if err := Extract(bytes.NewReader(arch), s.dest, Options{}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(old); err != nil || len(b) != 5000 {
		t.Errorf("a after a copy: %d bytes, %v; want 5000", len(b), err)
	}
	if names := dirNames(t, s.dest); !slices.Equal(names, []string{"a"}) {
		t.Errorf("dest after a copy holds %q, want just a", names)
	}
	// A directory in the way is reported before any data is written.
	if err := os.Mkdir(filepath.Join(s.dest, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := Extract(bytes.NewReader(buildTar(t, reg("d", "x"))), s.dest, Options{})
	if !errors.Is(err, fs.ErrExist) {
		t.Errorf("file over a directory: %v, want exists", err)
	}
	if names := dirNames(t, s.dest); !slices.Equal(names, []string{"a", "d"}) {
		t.Errorf("dest holds %q, want a and d", names)
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

func TestRoundTrip(t *testing.T) {
	src := t.TempDir()
	tree := filepath.Join(src, "tree")
	mustWrite := func(p, body string, mode fs.FileMode) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite(filepath.Join(tree, "a.txt"), "alpha", 0o644)
	mustWrite(filepath.Join(tree, "bin/run"), "#!/bin/sh\n", 0o755)
	mustWrite(filepath.Join(tree, "sub/deeper/c"), strings.Repeat("c", 100000), 0o600)
	os.Mkdir(filepath.Join(tree, "empty"), 0o700)
	os.Symlink("a.txt", filepath.Join(tree, "link"))
	os.Symlink("/etc/passwd", filepath.Join(tree, "abs-link"))
	os.Symlink("missing", filepath.Join(tree, "dangling"))

	var buf bytes.Buffer
	if err := Write(&buf, tree, "copy"); err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	if err := Extract(&buf, dst, Options{Top: "copy", Links: LinksKeep}); err != nil {
		t.Fatal(err)
	}
	if got, want := listTree(t, filepath.Join(dst, "copy")), listTree(t, tree); !slices.Equal(got, want) {
		t.Fatalf("trees differ:\n got %q\nwant %q", got, want)
	}

	// A symlink as the source is archived as the symlink, not its target.
	buf.Reset()
	if err := Write(&buf, filepath.Join(tree, "link"), "l"); err != nil {
		t.Fatal(err)
	}
	hdr, err := tar.NewReader(&buf).Next()
	if err != nil || hdr.Typeflag != tar.TypeSymlink || hdr.Linkname != "a.txt" || hdr.Name != "l" {
		t.Fatalf("symlink source: %+v %v", hdr, err)
	}
}

// listTree describes every path under root: type, permissions, content or
// link target.
func listTree(t *testing.T, root string) []string {
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		desc := rel + " " + fi.Mode().String()
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			desc += " -> " + l
		case fi.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			desc += fmt.Sprintf(" %d:%x mtime=%d", len(b), b[:min(len(b), 16)], fi.ModTime().Unix())
		}
		out = append(out, desc)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestWriteRejectsBadName(t *testing.T) {
	for _, name := range []string{"", "a/b", "..", "."} {
		if err := Write(io.Discard, t.TempDir(), name); err == nil {
			t.Errorf("name %q accepted", name)
		}
	}
}

func TestWriteSkipsSpecialFiles(t *testing.T) {
	d := t.TempDir()
	os.WriteFile(filepath.Join(d, "f"), []byte("x"), 0o644)
	if err := mkfifo(filepath.Join(d, "fifo")); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	var buf bytes.Buffer
	if err := Write(&buf, d, "top"); err != nil {
		t.Fatal(err)
	}
	var names []string
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		names = append(names, h.Name)
	}
	if !slices.Equal(names, []string{"top/", "top/f"}) {
		t.Fatalf("entries %q", names)
	}
}

func FuzzExtract(f *testing.F) {
	f.Add(buildTar(f, dir("a/"), reg("a/f", "x"), symlink("a/l", "/etc"), reg("a/l/passwd", "x")))
	f.Add(buildTar(f, reg("../x", "x")))
	f.Add(buildTar(f, dir("a/"), hardlink("a/h", "a/f"), reg("a/f", "y")))
	f.Add(buildTar(f, dir("a/"), dir("a/b/"), symlink("a/b/c", "../.."), reg("a/b/c/x", "z")))
	f.Add(paxTar("a\x00b"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s := newSandbox(t)
		Extract(bytes.NewReader(data), s.dest, Options{Links: LinksKeep})
		s.checkOutside(t)
		// Whatever was extracted stays inside dest: nothing below it is a
		// file whose real path leaves dest (hard links to outside files
		// would share the secret's inode).
		filepath.WalkDir(s.dest, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				if fi, err := os.Stat(p); err == nil && os.SameFile(fi, mustStat(t, filepath.Join(s.outside, "secret"))) {
					t.Fatalf("%s is a hard link to the outside file", p)
				}
			}
			return nil
		})
	})
}

func mustStat(t *testing.T, p string) fs.FileInfo {
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi
}

func mkfifo(p string) error { return syscall.Mkfifo(p, 0o644) }

// sparseMap pads a PAX 1.0 sparse map to the block it occupies.
func sparseMap(m string) []byte {
	b := make([]byte, 512)
	copy(b, m)
	return b
}

// A new top-level directory is built under a hidden name with its files
// created at their names (no temporary name each): modes and mtimes are
// the archive's, a name listed twice ends with the later entry, nothing
// hidden is left, and a stream that fails part way leaves nothing at all.
// Entries that alternate between directories use the right ones.
func TestExtractStagedTree(t *testing.T) {
	s := newSandbox(t)
	exe := reg("tree/d1/run", "#!/bin/sh")
	exe.mode = 0o750
	priv := reg("tree/d2/key", "k")
	priv.mode = 0o600
	arch := buildTar(t, dir("tree/"), reg("tree/d1/a", "a1"), exe, priv, reg("tree/d1/b", "b"),
		reg("tree/d2/c", "c"), reg("tree/d1/a", "a2"), reg("tree/top", "t"))
	if err := Extract(bytes.NewReader(arch), s.dest, Options{}); err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		body string
		mode fs.FileMode
	}{
		"tree/d1/a": {"a2", 0o644}, "tree/d1/run": {"#!/bin/sh", 0o750}, "tree/d1/b": {"b", 0o644},
		"tree/d2/key": {"k", 0o600}, "tree/d2/c": {"c", 0o644}, "tree/top": {"t", 0o644},
	}
	for p, w := range want {
		full := filepath.Join(s.dest, p)
		b, err := os.ReadFile(full)
		fi, serr := os.Lstat(full)
		if err != nil || serr != nil || string(b) != w.body || fi.Mode() != w.mode || !fi.ModTime().Equal(time.Unix(1700000000, 0)) {
			t.Errorf("%s: %q %v %v, %v; want %q %v", p, b, fi.Mode(), fi.ModTime(), err, w.body, w.mode)
		}
	}
	for _, d := range []string{"", "tree", "tree/d1", "tree/d2"} {
		for _, n := range dirNames(t, filepath.Join(s.dest, d)) {
			if strings.HasPrefix(n, ".") {
				t.Errorf("hidden %s left in %q", n, d)
			}
		}
	}
	// A second tree whose stream ends in the middle of a file leaves no
	// trace, not even the files completed before.
	arch = buildTar(t, dir("t2/"), reg("t2/done", "x"), reg("t2/sub/big", strings.Repeat("y", 5000)))
	if err := Extract(bytes.NewReader(arch[:len(arch)-3000]), s.dest, Options{}); err == nil {
		t.Fatal("truncated archive extracted without error")
	}
	if names := dirNames(t, s.dest); !slices.Equal(names, []string{"tree"}) {
		t.Errorf("dest after a failed copy holds %q, want just tree", names)
	}
}
