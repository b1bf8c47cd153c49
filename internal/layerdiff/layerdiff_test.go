//go:build linux

package layerdiff

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/errdefs"

	"golang.org/x/sys/unix"
)

var shift = Shift{HostUID: 200000, HostGID: 300000, Size: 65536}

func capV3(root uint32, eff bool) string {
	b := make([]byte, capV3Size)
	magic := uint32(capRev3)
	if eff {
		magic |= capFlagsEff
	}
	binary.LittleEndian.PutUint32(b, magic)
	binary.LittleEndian.PutUint32(b[4:], 1<<10) // CAP_NET_BIND_SERVICE permitted
	binary.LittleEndian.PutUint32(b[20:], root)
	return string(b)
}

func readTar(t *testing.T, b []byte) map[string]*tar.Header {
	t.Helper()
	out := map[string]*tar.Header{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = h
	}
}

// TestRewrite: ids in the sandbox's range map back, ids outside it become
// the overflow id (as the sandbox saw them), a v3 capability of the
// sandbox's root becomes v2 and one of another root is dropped; data is
// copied unchanged.
func TestRewrite(t *testing.T) {
	var in bytes.Buffer
	tw := tar.NewWriter(&in)
	add := func(name string, uid, gid int, pax map[string]string, data string) {
		must(t, tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Uid: uid, Gid: gid, Size: int64(len(data)), PAXRecords: pax, Uname: "host", Format: tar.FormatPAX}))
		_, err := tw.Write([]byte(data))
		must(t, err)
	}
	add("root", 200000, 300000, nil, "r")
	add("user", 201000, 301001, nil, "u")
	add("last", 265535, 365535, nil, "")
	add("outside", 5, 265536+100000, nil, "o")
	add("cap-own", 200000, 300000, map[string]string{capKey: capV3(200000, true)}, "")
	add("cap-other", 200000, 300000, map[string]string{capKey: capV3(100000, true)}, "")
	v2 := capV3(0, false)[:capV2Size]
	v2b := []byte(v2)
	binary.LittleEndian.PutUint32(v2b, capRev2)
	add("cap-v2", 200000, 300000, map[string]string{capKey: string(v2b)}, "")
	must(t, tw.Close())

	var out bytes.Buffer
	must(t, Rewrite(&out, &in, shift))
	h := readTar(t, out.Bytes())
	for name, want := range map[string][2]int{"root": {0, 0}, "user": {1000, 1001}, "last": {65535, 65535}, "outside": {overflowID, overflowID}} {
		if h[name].Uid != want[0] || h[name].Gid != want[1] || h[name].Uname != "" {
			t.Errorf("%s: %d:%d %q, want %d:%d", name, h[name].Uid, h[name].Gid, h[name].Uname, want[0], want[1])
		}
	}
	c := []byte(h["cap-own"].PAXRecords[capKey])
	if len(c) != capV2Size || binary.LittleEndian.Uint32(c) != capRev2|capFlagsEff || binary.LittleEndian.Uint32(c[4:]) != 1<<10 {
		t.Errorf("own-root v3 capability became %x", c)
	}
	if _, ok := h["cap-other"].PAXRecords[capKey]; ok {
		t.Errorf("another root's v3 capability was kept")
	}
	if h["cap-v2"].PAXRecords[capKey] != string(v2b) {
		t.Errorf("v2 capability changed")
	}
	if h["user"].Size != 1 {
		t.Errorf("data lost: %+v", h["user"])
	}
}

// TestWriteDiffApply: an overlay upperdir with a new file, a whiteout and
// an opaque directory becomes an OCI layer with ownership unshifted, and
// applying it makes the same overlay layer, unshifted.
func TestWriteDiffApply(t *testing.T) {
	dir := t.TempDir()
	lower, upper, applied := filepath.Join(dir, "lower"), filepath.Join(dir, "upper"), filepath.Join(dir, "applied")
	for _, d := range []string{lower + "/d", upper + "/d", applied} {
		must(t, os.MkdirAll(d, 0o755))
	}
	must(t, os.WriteFile(lower+"/gone", []byte("g"), 0o644))
	must(t, os.WriteFile(lower+"/d/old", []byte("o"), 0o644))
	must(t, os.WriteFile(upper+"/new", []byte("new data"), 0o600))
	must(t, os.Lchown(upper+"/new", 201000, 301000))
	must(t, os.Lchown(upper+"/d", 200000, 300000))
	must(t, unix.Mknod(upper+"/gone", unix.S_IFCHR, 0))
	must(t, unix.Setxattr(upper+"/d", "trusted.overlay.opaque", []byte("y"), 0))
	must(t, os.WriteFile(upper+"/d/fresh", []byte("f"), 0o644))
	must(t, os.Lchown(upper+"/d/fresh", 200000, 300000))

	var buf bytes.Buffer
	must(t, WriteDiff(context.Background(), &buf, lower, upper, shift))
	h := readTar(t, buf.Bytes())
	if n := h["new"]; n == nil || n.Uid != 1000 || n.Gid != 1000 || n.Mode&0o777 != 0o600 {
		t.Errorf("new: %+v", n)
	}
	for _, name := range []string{".wh.gone", "d/.wh..wh..opq", "d/fresh", "d/"} {
		if h[name] == nil {
			t.Errorf("no %s in the layer (%d entries)", name, len(h))
		}
	}
	if h["d/"] != nil && h["d/"].Uid != 0 {
		t.Errorf("d/ owned %d", h["d/"].Uid)
	}

	must(t, Apply(context.Background(), applied, []string{lower}, bytes.NewReader(buf.Bytes())))
	var st unix.Stat_t
	must(t, unix.Lstat(applied+"/gone", &st))
	if st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != 0 {
		t.Errorf("gone is not an overlay whiteout: mode %o rdev %d", st.Mode, st.Rdev)
	}
	v := make([]byte, 1)
	if n, err := unix.Getxattr(applied+"/d", "trusted.overlay.opaque", v); err != nil || n != 1 || v[0] != 'y' {
		t.Errorf("d not opaque: %v", err)
	}
	must(t, unix.Lstat(applied+"/new", &st))
	if st.Uid != 1000 || st.Gid != 1000 {
		t.Errorf("applied new owned %d:%d", st.Uid, st.Gid)
	}
	if b, _ := os.ReadFile(applied + "/new"); string(b) != "new data" {
		t.Errorf("applied new = %q", b)
	}
}

func TestOverlayDirs(t *testing.T) {
	up, lows, err := OverlayDirs([]mount.Mount{{Type: "overlay", Source: "overlay", Options: []string{"index=off", "workdir=/s/2/work", "upperdir=/s/2/fs", "lowerdir=/s/1/fs:/s/0/fs", "uidmap=0:200000:65536"}}})
	if err != nil || up != "/s/2/fs" || len(lows) != 2 || lows[0] != "/s/1/fs" || lows[1] != "/s/0/fs" {
		t.Errorf("overlay: %q %q %v", up, lows, err)
	}
	for _, ms := range [][]mount.Mount{nil, {{Type: "btrfs", Source: "/dev/x"}}, {{Type: "overlay"}, {Type: "overlay"}}} {
		if _, _, err := OverlayDirs(ms); !errdefs.IsFailedPrecondition(err) {
			t.Errorf("%v: %v, want failed_precondition", ms, err)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
