//go:build linux

package e2e

import (
	"archive/tar"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestImageImportListRemove imports an OCI archive exported by containerd's
// own ctr (the format docker save and skopeo also write), runs it, removes it.
func TestImageImportListRemove(t *testing.T) {
	tarPath := filepath.Join(t.TempDir(), "busybox-oci.tar")
	// --local: ctr writes the archive itself instead of streaming it through
	// containerd's transfer service.
	out, err := exec.Command(env.ctrd.Ctr, "--address", env.ctrd.Address, "-n", namespace,
		"images", "export", "--local", tarPath, testImage).CombinedOutput()
	if err != nil {
		t.Fatalf("ctr export: %v %s", err, out)
	}
	// A broken archive here would be ctr's fault, not boxd's: say so.
	if err := readWholeTar(tarPath); err != nil {
		t.Fatalf("ctr export wrote a broken archive: %v", err)
	}
	if _, err := boxctl(nil, "image", "import", tarPath, "--name", "copies/busybox:v1"); err != nil {
		t.Fatal(err)
	}
	ls, err := boxctl(nil, "image", "ls")
	if err != nil || !strings.Contains(ls, "copies/busybox:v1") || !strings.Contains(ls, testImage) {
		t.Fatalf("image ls = %q, %v", ls, err)
	}
	stdout, stderr, code := boxctlRun("run", "--image", "copies/busybox:v1", "--", "cat", "/etc/os-release")
	if code != 0 || !strings.Contains(stdout, "busybox") {
		t.Errorf("run from the imported image: %d %q %q", code, stdout, stderr)
	}
	if _, err := boxctl(nil, "image", "rm", "copies/busybox:v1"); err != nil {
		t.Fatal(err)
	}
	ls, _ = boxctl(nil, "image", "ls")
	if strings.Contains(ls, "copies/busybox") {
		t.Errorf("image still listed after rm: %q", ls)
	}
	if _, stderr, code := boxctlRun("image", "rm", "copies/busybox:v1"); code == 0 || !strings.Contains(stderr, "not_found") {
		t.Errorf("second rm: %d %q", code, stderr)
	}
}

func TestImageImportRejectsGarbage(t *testing.T) {
	junk := filepath.Join(t.TempDir(), "junk.tar")
	must(t, os.WriteFile(junk, []byte(strings.Repeat("not a tar ", 1000)), 0o644))
	if _, stderr, code := boxctlRun("image", "import", junk, "--name", "junk:1"); code == 0 || !strings.Contains(stderr, "invalid_argument") {
		t.Errorf("garbage archive: exit %d, %q", code, stderr)
	}
	if _, stderr, code := boxctlRun("image", "import", "--rootfs", t.TempDir()+"/missing", "--name", "x"); code == 0 || !strings.Contains(stderr, "not a directory") {
		t.Errorf("missing rootfs dir: exit %d, %q", code, stderr)
	}
	if _, stderr, code := boxctlRun("image", "import", "--rootfs", env.busybox, "--name", "Bad Name"); code == 0 || !strings.Contains(stderr, "invalid_argument") {
		t.Errorf("bad name: exit %d, %q", code, stderr)
	}
	ls, _ := boxctl(nil, "image", "ls")
	if strings.Contains(ls, "junk") {
		t.Errorf("a failed import is listed: %q", ls)
	}
}

func readWholeTar(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		_, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if _, err := io.Copy(io.Discard, tr); err != nil {
			return err
		}
	}
}
