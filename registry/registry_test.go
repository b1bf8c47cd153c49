package registry

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
)

func TestParseRef(t *testing.T) {
	for in, want := range map[string]Ref{
		"127.0.0.1:5000/team/app":        {Name: "127.0.0.1:5000/team/app:latest", Host: "127.0.0.1:5000"},
		"localhost/app:v1":               {Name: "localhost/app:v1", Host: "localhost"},
		"registry.example:443/a/b/c:1.0": {Name: "registry.example:443/a/b/c:1.0", Host: "registry.example:443"},
		"reg.example/app@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef": {
			Name: "reg.example/app@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", Host: "reg.example"},
	} {
		got, err := ParseRef(in)
		if err != nil || got != want {
			t.Errorf("ParseRef(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for in, word := range map[string]string{
		"":                             "empty",
		"busybox":                      "no registry host",
		"team/app:v1":                  "no registry host",
		"127.0.0.1:5000/UPPER":         "malformed",
		"127.0.0.1:5000/a b":           "malformed",
		"127.0.0.1:5000/app:!!":        "malformed",
		"127.0.0.1:5000/app@sha256:12": "malformed",
	} {
		_, err := ParseRef(in)
		if !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), word) {
			t.Errorf("ParseRef(%q) = %v; want invalid argument mentioning %q", in, err, word)
		}
	}
}

func layer(t *testing.T, gz bool, entries ...tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	var tw *tar.Writer
	var zw *gzip.Writer
	if gz {
		zw = gzip.NewWriter(&buf)
		tw = tar.NewWriter(zw)
	} else {
		tw = tar.NewWriter(&buf)
	}
	for _, h := range entries {
		h := h
		body := make([]byte, h.Size)
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func TestCheckLayer(t *testing.T) {
	reg := func(name string, size int64) tar.Header {
		return tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: size}
	}
	good := layer(t, true, tar.Header{Name: "etc/", Typeflag: tar.TypeDir, Mode: 0o755}, reg("etc/passwd", 10),
		reg("/abs/ok", 1), reg("./a/../b", 1), tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"},
		tar.Header{Name: "h", Typeflag: tar.TypeLink, Linkname: "etc/passwd"})
	if err := checkLayer(bytes.NewReader(good), digest.FromBytes(good), newBudget(0)); err != nil {
		t.Fatalf("good layer: %v", err)
	}
	if err := checkLayer(bytes.NewReader(layer(t, false, reg("x", 5))), "sha256:x", newBudget(1<<20)); err != nil {
		t.Fatalf("plain tar: %v", err)
	}
	for name, tc := range map[string]struct {
		data []byte
		b    *budget
		word string
		inv  bool
	}{
		"dotdot":        {layer(t, true, reg("../escape", 1)), newBudget(0), `"../escape" leaves`, true},
		"nested dotdot": {layer(t, true, reg("a/../../escape", 1)), newBudget(0), "leaves", true},
		"hardlink out":  {layer(t, true, tar.Header{Name: "h", Typeflag: tar.TypeLink, Linkname: "../../etc/shadow"}), newBudget(0), "hard link", true},
		"bomb":          {layer(t, true, reg("zeros", 4<<20)), newBudget(1 << 20), "max-image-size", false},
		"garbage":       {[]byte("this is not a tar at all, not even close; it goes on for a while............................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................"), newBudget(0), "not a valid tar", true},
	} {
		err := checkLayer(bytes.NewReader(tc.data), "sha256:feed", tc.b)
		if err == nil || !strings.Contains(err.Error(), tc.word) || !strings.Contains(err.Error(), "sha256:feed") {
			t.Errorf("%s: %v; want an error naming the layer and %q", name, err, tc.word)
			continue
		}
		if tc.inv != errdefs.IsInvalidArgument(err) || !tc.inv && !errdefs.IsResourceExhausted(err) {
			t.Errorf("%s: %v has the wrong class", name, err)
		}
	}
}
