package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/boxd-dev/boxd/internal/safetar"
)

type tarEntry struct {
	name, link string
	typ        byte
	mode       int64
	body       string
}

func hostileTar(t *testing.T, entries ...tarEntry) *bytes.Reader {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		mode := e.mode
		if mode == 0 {
			mode = 0o644
		}
		hdr := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: mode, Size: int64(len(e.body))}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return bytes.NewReader(buf.Bytes())
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, de := range des {
		out = append(out, de.Name())
	}
	return out
}

// The function boxctl cp runs on what CopyOut streams, fed the archives a
// sandbox root who impersonates the init could send: the host name comes
// from the request, never from the archive.
func TestExtractCopyOutHostileNames(t *testing.T) {
	home := t.TempDir()
	bashrc := filepath.Join(home, ".bashrc")
	if err := os.WriteFile(bashrc, []byte("original"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		entries []tarEntry
		want    string
	}{
		{"first entry named like a host file", []tarEntry{{name: ".bashrc", typ: tar.TypeReg, body: "pwned"}}, `entry ".bashrc"`},
		{"second top-level entry", []tarEntry{{name: "out/", typ: tar.TypeDir}, {name: ".bashrc", typ: tar.TypeReg, body: "pwned"}}, `entry ".bashrc"`},
		{"dotdot", []tarEntry{{name: "out/../.bashrc", typ: tar.TypeReg, body: "pwned"}}, `entry "out/../.bashrc"`},
		{"absolute", []tarEntry{{name: bashrc, typ: tar.TypeReg, body: "pwned"}}, "absolute name"},
		{"symlink to a host file", []tarEntry{{name: "out/", typ: tar.TypeDir}, {name: "out/rc", typ: tar.TypeSymlink, link: "../.bashrc"}}, `entry "out/rc"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var warn bytes.Buffer
			err := extractCopyOut(hostileTar(t, tc.entries...), "/workspace/out", home, safetar.LinksRefuse, &warn)
			if !errors.Is(err, safetar.ErrUnsafe) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrUnsafe naming %s", err, tc.want)
			}
			if got := names(t, home); !slices.Equal(got, []string{".bashrc"}) {
				t.Errorf("host dir holds %q after a refused copy", got)
			}
			if b, _ := os.ReadFile(bashrc); string(b) != "original" {
				t.Errorf(".bashrc = %q", b)
			}
		})
	}
}

func TestExtractCopyOutNames(t *testing.T) {
	host := t.TempDir()
	tree := func() *bytes.Reader {
		return hostileTar(t, tarEntry{name: "out/", typ: tar.TypeDir, mode: 0o755},
			tarEntry{name: "out/f", typ: tar.TypeReg, body: "x"},
			tarEntry{name: "out/abs", typ: tar.TypeSymlink, link: "/etc/passwd"})
	}
	var warn bytes.Buffer
	// Into an existing directory, under base(PATH), whatever the path's
	// spelling.
	for _, remote := range []string{"/workspace/out", "/workspace/out/", "out", "../x/./out/."} {
		dir := filepath.Join(host, "into")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := extractCopyOut(tree(), remote, dir, safetar.LinksSkipUnsafe, &warn); err != nil {
			t.Fatalf("%s: %v", remote, err)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "out", "f")); err != nil || string(b) != "x" {
			t.Errorf("%s: out/f = %q, %v", remote, b, err)
		}
		os.RemoveAll(dir)
	}
	if !strings.Contains(warn.String(), `left out symlink "out/abs" -> "/etc/passwd"`) {
		t.Errorf("warning %q", warn.String())
	}
	// To a new name.
	if err := extractCopyOut(tree(), "/workspace/out", filepath.Join(host, "new"), safetar.LinksSkipUnsafe, &warn); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(host, "new", "f")); err != nil || string(b) != "x" {
		t.Errorf("new/f = %q, %v", b, err)
	}
	// Refused by default.
	err := extractCopyOut(tree(), "/workspace/out", filepath.Join(host, "refused"), safetar.LinksRefuse, &warn)
	var lo *safetar.LinkOutsideError
	if !errors.As(err, &lo) || lo.Target != "/etc/passwd" {
		t.Errorf("err = %v, want a LinkOutsideError", err)
	}
	if _, err := os.Lstat(filepath.Join(host, "refused")); err == nil {
		t.Error("a refused copy left its directory")
	}
	// Paths whose name the host cannot know.
	for _, remote := range []string{"/", ".", "..", "a/..", "//"} {
		if err := extractCopyOut(tree(), remote, host, safetar.LinksRefuse, &warn); err == nil || !strings.Contains(err.Error(), "no final name") {
			t.Errorf("%q: %v, want no final name", remote, err)
		}
	}
}
