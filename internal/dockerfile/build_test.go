package dockerfile

import (
	"archive/tar"
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
)

func TestParseNamesTheLine(t *testing.T) {
	for src, want := range map[string]string{
		"FROM a\nRUN true\nVOLUME /x\n":         "Dockerfile line 3: VOLUME is not supported",
		"FROM a\nENV\n":                         "Dockerfile line 2: ENV",
		"FROM a\nFROM b\n":                      "Dockerfile line 2: a second FROM",
		"RUN true\nFROM a\n":                    "Dockerfile line 1: RUN before FROM",
		"FROM a\nRUN --network=host true\n":     "Dockerfile line 2: RUN flags",
		"FROM a\nCOPY --from=x /a /b\n":         "Dockerfile line 2: COPY flags",
		"FROM a\nRUN <<EOF\necho hi\nEOF\n":     "Dockerfile line 2: here-documents",
		"# nothing\n":                           "file with no instructions",
		"ARG X=1\n":                             "Dockerfile: no FROM",
		"FROM a\nSHELL [\"/bin/bash\", \"-c\"]": "Dockerfile line 2: SHELL is not supported",
	} {
		_, err := Parse([]byte(src))
		if err == nil || !strings.Contains(err.Error(), want) || !errdefs.IsInvalidArgument(err) {
			t.Errorf("Parse(%q) = %v, want invalid argument naming %q", src, err, want)
		}
	}
	df, err := Parse([]byte("ARG V=1\nFROM a:$V\nENV K=v\nARG X\nRUN echo $K\nCOPY --chown=1:1 a b/\nCMD [\"x\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(df.MetaArgs) != 1 || df.FromLine != 2 || len(df.Steps) != 5 || df.Steps[2].Line != 5 {
		t.Errorf("parsed %+v", df)
	}
}

func testContext(t *testing.T, entries ...*tar.Header) *Context {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range entries {
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(h.Name))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write([]byte(h.Name))
		}
	}
	tw.Close()
	c, err := ReadContext(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCopyStaysInTheContext(t *testing.T) {
	c := testContext(t,
		&tar.Header{Name: "d/f", Typeflag: tar.TypeReg, Mode: 0o644},
		&tar.Header{Name: "d/in", Typeflag: tar.TypeSymlink, Linkname: "f"},
		&tar.Header{Name: "abs", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"},
		&tar.Header{Name: "up", Typeflag: tar.TypeSymlink, Linkname: "../x"},
		&tar.Header{Name: "e/up", Typeflag: tar.TypeSymlink, Linkname: "../../x"},
		&tar.Header{Name: "todir", Typeflag: tar.TypeSymlink, Linkname: "d"},
	)
	for _, src := range []string{"../x", "d/../../x", "abs", "up", "e", "up/y"} {
		_, err := c.CopyTar([]string{src}, "/dst/", "/")
		if !IsOutside(err) {
			t.Errorf("CopyTar(%s) = %v, want refused as outside the context", src, err)
		}
	}
	if _, err := c.CopyTar([]string{"nosuch"}, "/dst/", "/"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("missing source: %v", err)
	}
	// Links inside the context are fine; a linked directory is followed.
	cp, err := c.CopyTar([]string{"todir"}, "rel", "/work")
	if err != nil {
		t.Fatal(err)
	}
	if cp.Dir != "/work/rel" || strings.Join(cp.Tops, ",") != "f,in" {
		t.Errorf("copy of todir: dir %s tops %v", cp.Dir, cp.Tops)
	}
	// A file to a new name: extracted into the parent under that name.
	cp, err = c.CopyTar([]string{"d/f"}, "/opt/renamed", "/")
	if err != nil || cp.Dir != "/opt" || strings.Join(cp.Tops, ",") != "renamed" {
		t.Errorf("file copy: %+v, %v", cp, err)
	}
	cp2, _ := c.CopyTar([]string{"d/f"}, "/opt/renamed", "/")
	if cp2.Hash != cp.Hash {
		t.Errorf("the same copy hashed differently")
	}
	// Bad names in the context tar itself.
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "../evil", Typeflag: tar.TypeReg})
	tw.Close()
	if _, err := ReadContext(&buf); !errdefs.IsInvalidArgument(err) {
		t.Errorf("context with ../evil: %v", err)
	}
}
