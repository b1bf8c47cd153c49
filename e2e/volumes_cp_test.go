//go:build linux

package e2e

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/boxd-dev/boxd/internal/rpcclient"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// tarEntry is one entry of a hand-made (hostile) tar.
type tarEntry struct {
	name, link string
	typ        byte
	body       string
}

func makeTar(t *testing.T, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: 0o644, Size: int64(len(e.body))}
		if e.typ == tar.TypeDir {
			hdr.Mode = 0o755
		}
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
	return buf.Bytes()
}

// copyIntoVolume sends a tar through the API.
func copyIntoVolume(t *testing.T, vol, path string, data []byte) error {
	t.Helper()
	stream := rpcclient.NewVolumes(env.socket).CopyIntoVolume(ctx(t))
	if err := stream.Send(&boxdv1.CopyIntoVolumeRequest{Name: vol, Path: path, Data: data}); err != nil {
		t.Logf("send: %v", err)
	}
	_, err := stream.CloseAndReceive()
	return err
}

// TestVolumeCopy: boxctl volume cp copies in and out of a volume no
// sandbox mounts read-write; what it writes is sandbox root's in the
// sandboxes that mount the volume. A volume's symlinks to /etc and /,
// and tars with "../" names, absolute names and absolute symlinks, read
// or write nothing outside the volume.
func TestVolumeCopy(t *testing.T) {
	tag := strconv.Itoa(os.Getpid())
	vol := newVolume(t, "cp-"+tag)
	local := t.TempDir()
	src := filepath.Join(local, "tree")
	if err := os.MkdirAll(filepath.Join(src, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(src, "a.txt"), []byte("alpha\n"), 0o644)
	os.WriteFile(filepath.Join(src, "sub", "b.txt"), []byte("beta\n"), 0o600)
	if _, stderr, code := boxctlRun("volume", "cp", src, vol.Name+":/"); code != 0 {
		t.Fatalf("volume cp in: %s", stderr)
	}
	if _, stderr, code := boxctlRun("volume", "cp", filepath.Join(src, "a.txt"), vol.Name+":/tree/renamed.txt"); code != 0 {
		t.Fatalf("volume cp in as a name: %s", stderr)
	}
	// Out again, to the host.
	if _, stderr, code := boxctlRun("volume", "cp", vol.Name+":/tree", filepath.Join(local, "back")); code != 0 {
		t.Fatalf("volume cp out: %s", stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(local, "back", "sub", "b.txt")); string(b) != "beta\n" {
		t.Errorf("copied out sub/b.txt = %q", b)
	}
	// In a sandbox: the files are root's, with their modes.
	w := newSandbox(t, "--volume", vol.Name+":/v")
	if got := sh(t, w, "stat -c '%u:%g %a %n' /v/tree /v/tree/a.txt /v/tree/sub/b.txt /v/tree/renamed.txt && cat /v/tree/renamed.txt"); got !=
		"0:0 755 /v/tree\n0:0 644 /v/tree/a.txt\n0:0 600 /v/tree/sub/b.txt\n0:0 644 /v/tree/renamed.txt\nalpha\n" {
		t.Errorf("in the sandbox:\n%s", got)
	}
	// The sandbox plants symlinks to the host's /etc and /.
	sh(t, w, "ln -s /etc /v/etc && ln -s / /v/root && mkdir /v/d && ln -s /tmp /v/d/tmp")
	// While it mounts the volume read-write: refused, naming it.
	_, stderr, code := boxctlRun("volume", "cp", filepath.Join(src, "a.txt"), vol.Name+":/x.txt")
	if code == 0 || !strings.Contains(stderr, "failed_precondition") || !strings.Contains(stderr, w) {
		t.Errorf("volume cp while mounted read-write: exit %d %q", code, stderr)
	}
	if _, stderr, code := boxctlRun("rm", "-f", w); code != 0 {
		t.Fatalf("rm: %s", stderr)
	}
	// A read-only mount does not stop a copy.
	newSandbox(t, "--volume", vol.Name+":/v:ro")
	probe := "boxd-volcp-" + tag
	for _, dest := range []string{"/etc", "/root/etc", "/root/tmp", "/d/tmp", "/etc/" + probe, "/d/tmp/" + probe} {
		_, stderr, code := boxctlRun("volume", "cp", filepath.Join(src, "a.txt"), vol.Name+":"+dest+"/"+probe)
		if code == 0 {
			t.Errorf("volume cp to %s through a symlink succeeded", dest)
		}
		t.Logf("cp to %s: exit %d %s", dest, code, strings.TrimSpace(stderr))
	}
	for _, p := range []string{"/etc/" + probe, "/tmp/" + probe, "/" + probe} {
		if _, err := os.Lstat(p); err == nil {
			os.Remove(p)
			t.Errorf("volume cp wrote %s on the host", p)
		}
	}
	// Reading through the symlinks: refused, nothing of the host's.
	for _, p := range []string{"/etc/passwd", "/root/etc/passwd", "/d/tmp/x"} {
		out := filepath.Join(local, "out-"+strings.ReplaceAll(p, "/", "_"))
		_, stderr, code := boxctlRun("volume", "cp", vol.Name+":"+p, out)
		if code == 0 {
			t.Errorf("volume cp out of %s through a symlink succeeded", p)
		}
		if !strings.Contains(stderr, "invalid_argument") || !strings.Contains(stderr, "symlink") {
			t.Errorf("volume cp out of %s: %q", p, stderr)
		}
		if _, err := os.Lstat(out); err == nil {
			t.Errorf("volume cp out of %s wrote %s", p, out)
		}
	}
	hostileTars(t, vol.Name, tag)
	wantCode(t, "copy into a missing volume", copyIntoVolume(t, "missing-"+tag, "/", makeTar(t, tarEntry{name: "f", typ: tar.TypeReg})), connect.CodeNotFound, "missing-"+tag)
}

// hostileTars sends tars whose names climb out or are absolute, and
// whose symlinks lead out: each refused, nothing written on the host.
func hostileTars(t *testing.T, vol, tag string) {
	t.Helper()
	escape := "/tmp/boxd-volcp-escape-" + tag
	cases := map[string][]tarEntry{
		"dotdot":   {{name: "../../../../../../.." + escape, typ: tar.TypeReg, body: "x"}},
		"absolute": {{name: escape, typ: tar.TypeReg, body: "x"}},
		"symlink": {
			{name: "top/", typ: tar.TypeDir},
			{name: "top/l", typ: tar.TypeSymlink, link: "/tmp"},
			{name: "top/l/boxd-volcp-escape-" + tag, typ: tar.TypeReg, body: "x"},
		},
		"symlink in volume": {{name: "etc/boxd-volcp-escape-" + tag, typ: tar.TypeReg, body: "x"}},
	}
	for what, entries := range cases {
		err := copyIntoVolume(t, vol, "/", makeTar(t, entries...))
		if err == nil {
			t.Errorf("hostile tar %s: accepted", what)
		} else if c := connect.CodeOf(err); c != connect.CodeInvalidArgument {
			t.Errorf("hostile tar %s: %v, want invalid_argument", what, err)
		}
	}
	for _, p := range []string{escape, "/etc/boxd-volcp-escape-" + tag} {
		if _, err := os.Lstat(p); err == nil {
			os.Remove(p)
			t.Errorf("a hostile tar wrote %s on the host", p)
		}
	}
}
