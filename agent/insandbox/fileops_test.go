//go:build linux

package insandbox

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/boxd-dev/boxd/agent/wire"
	"github.com/boxd-dev/boxd/internal/safetar"
	"github.com/containerd/errdefs"
)

// makeTree creates a small tree with a nested file, an executable and a
// symlink, and returns its root.
func makeTree(t *testing.T) string {
	root := filepath.Join(t.TempDir(), "tree")
	for p, body := range map[string]string{"a.txt": "alpha", "sub/b.txt": strings.Repeat("b", 100000), "sub/run": "#!/bin/sh\n"} {
		full := filepath.Join(root, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(filepath.Join(root, "sub/run"), 0o755)
	if err := os.Symlink("../a.txt", filepath.Join(root, "sub/link")); err != nil {
		t.Fatal(err)
	}
	return root
}

func tarOf(t *testing.T, path, name string) []byte {
	var buf bytes.Buffer
	if err := safetar.Write(&buf, path, name); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// describe lists a tree as "path mode [content|-> target]" lines.
func describe(t *testing.T, root string) string {
	var sb strings.Builder
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fi, _ := d.Info()
		sb.WriteString(rel + " " + fi.Mode().String())
		if fi.Mode()&fs.ModeSymlink != 0 {
			l, _ := os.Readlink(p)
			sb.WriteString(" -> " + l)
		} else if fi.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			sb.WriteString(" " + string(b[:min(len(b), 20)]))
		}
		sb.WriteString("\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sb.String()
}

func TestCopyRoundTrip(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		ctx := testCtx(t)
		src := makeTree(t)
		want := describe(t, src)

		// Into an existing directory: the top-level name is kept.
		if err := tg.client.CopyIn(ctx, tg.workdir, bytes.NewReader(tarOf(t, src, "tree"))); err != nil {
			t.Fatal(err)
		}
		if got := describe(t, filepath.Join(tg.workdir, "tree")); got != want {
			t.Fatalf("copied into dir:\n%s\nwant\n%s", got, want)
		}
		// To a new name: the top-level entry is renamed (relative dest).
		if err := tg.client.CopyIn(ctx, "renamed", bytes.NewReader(tarOf(t, src, "tree"))); err != nil {
			t.Fatal(err)
		}
		if got := describe(t, filepath.Join(tg.workdir, "renamed")); got != want {
			t.Fatalf("copied as new name:\n%s\nwant\n%s", got, want)
		}

		// Out again, and extracted on "the host" with safetar.
		var out bytes.Buffer
		if err := tg.client.CopyOut(ctx, filepath.Join(tg.workdir, "renamed"), &out); err != nil {
			t.Fatal(err)
		}
		dst := t.TempDir()
		if err := safetar.Extract(&out, dst, safetar.Options{Top: "renamed"}); err != nil {
			t.Fatal(err)
		}
		if got := describe(t, filepath.Join(dst, "renamed")); got != want {
			t.Fatalf("copied out:\n%s\nwant\n%s", got, want)
		}

		// A single file, and a symlink that is archived, not followed.
		out.Reset()
		if err := tg.client.CopyOut(ctx, "renamed/sub/link", &out); err != nil {
			t.Fatal(err)
		}
		hdr, err := tar.NewReader(&out).Next()
		if err != nil || hdr.Name != "link" || hdr.Typeflag != tar.TypeSymlink || hdr.Linkname != "../a.txt" {
			t.Fatalf("copy-out of symlink: %+v %v", hdr, err)
		}
	})
}

func TestCopyErrors(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		ctx := testCtx(t)
		err := tg.client.CopyOut(ctx, "/no/such/path", io.Discard)
		if !errdefs.IsNotFound(err) {
			t.Errorf("copy-out of missing path: %v", err)
		}
		err = tg.client.CopyIn(ctx, "/no/such/dir/x", bytes.NewReader(tarOf(t, makeTree(t), "tree")))
		if !errdefs.IsNotFound(err) || !strings.Contains(err.Error(), "no such directory") {
			t.Errorf("copy-in to missing dir: %v", err)
		}
		err = tg.client.CopyOut(ctx, "/", io.Discard)
		if !errdefs.IsInvalidArgument(err) {
			t.Errorf("copy-out of /: %v", err)
		}
	})
}

func TestCopyInHostileTarRejected(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		ctx := testCtx(t)
		outside := filepath.Join(filepath.Dir(tg.workdir), "outside")
		os.MkdirAll(outside, 0o755)
		for name, entries := range map[string][]tar.Header{
			"dotdot": {{Name: "../outside/evil", Typeflag: tar.TypeReg, Mode: 0o644}},
			"symlink then write": {
				{Name: "x", Typeflag: tar.TypeSymlink, Linkname: outside},
				{Name: "x/evil", Typeflag: tar.TypeReg, Mode: 0o644},
			},
		} {
			var buf bytes.Buffer
			tw := tar.NewWriter(&buf)
			for _, h := range entries {
				tw.WriteHeader(&h)
			}
			tw.Close()
			err := tg.client.CopyIn(ctx, tg.workdir, &buf)
			if !errdefs.IsInvalidArgument(err) {
				t.Errorf("%s: err = %v, want invalid argument", name, err)
			}
			if _, err := os.Lstat(filepath.Join(outside, "evil")); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("%s: file written outside: %v", name, err)
			}
		}
		// The init still works afterwards.
		if err := tg.client.Ping(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestStatFile: file-stat describes a file, a symlink (not followed), a
// directory, and refuses a missing or empty path with the right codes.
func TestStatFile(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		ctx := testCtx(t)
		os.WriteFile(filepath.Join(tg.workdir, "f"), []byte("12345"), 0o640)
		os.Symlink("f", filepath.Join(tg.workdir, "l"))
		fi, err := tg.client.StatFile(ctx, wire.FileStatArgs{Path: "f"})
		if err != nil || fi.Name != "f" || fi.Size != 5 || fi.FileMode() != 0o640 || fi.Type != wire.FileTypeRegular || fi.Mtime.IsZero() {
			t.Fatalf("stat f: %+v %v", fi, err)
		}
		fi, err = tg.client.StatFile(ctx, wire.FileStatArgs{Path: filepath.Join(tg.workdir, "l")})
		if err != nil || fi.FileMode()&fs.ModeSymlink == 0 || fi.LinkTarget != "f" {
			t.Fatalf("stat l: %+v %v", fi, err)
		}
		fi, err = tg.client.StatFile(ctx, wire.FileStatArgs{Path: tg.workdir})
		if err != nil || fi.Type != wire.FileTypeDir {
			t.Fatalf("stat dir: %+v %v", fi, err)
		}
		if _, err := tg.client.StatFile(ctx, wire.FileStatArgs{Path: "missing"}); !errdefs.IsNotFound(err) {
			t.Fatalf("stat missing: %v", err)
		}
		if _, err := tg.client.StatFile(ctx, wire.FileStatArgs{Path: ""}); !errdefs.IsInvalidArgument(err) {
			t.Fatalf("stat empty: %v", err)
		}
	})
}
