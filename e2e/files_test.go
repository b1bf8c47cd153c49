//go:build linux

package e2e

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCopyFilesAndTrees(t *testing.T) {
	id := newSandbox(t)
	host := t.TempDir()

	// A tree with a nested dir, an executable and a symlink goes in...
	src := filepath.Join(host, "proj")
	must(t, os.MkdirAll(filepath.Join(src, "sub", "deep"), 0o755))
	payload := make([]byte, 3<<20+17)
	_, _ = rand.Read(payload)
	must(t, os.WriteFile(filepath.Join(src, "sub", "deep", "blob.bin"), payload, 0o644))
	must(t, os.WriteFile(filepath.Join(src, "run.sh"), []byte("#!/bin/sh\necho ran\n"), 0o755))
	must(t, os.Symlink("run.sh", filepath.Join(src, "link")))
	if _, err := boxctl(nil, "cp", src, id+":/workspace"); err != nil {
		t.Fatal(err)
	}
	if got := sh(t, id, "cd /workspace/proj && ./run.sh && readlink link && wc -c < sub/deep/blob.bin"); got != "ran\nrun.sh\n3145745\n" {
		t.Errorf("inside after cp in: %q", got)
	}

	// ...and comes back out under a new name, byte for byte.
	out := filepath.Join(host, "back")
	if _, err := boxctl(nil, "cp", id+":/workspace/proj", out); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(out, "sub", "deep", "blob.bin"))
	if err != nil || !bytes.Equal(got, payload) {
		t.Errorf("blob round trip differs (%v)", err)
	}
	if st, err := os.Stat(filepath.Join(out, "run.sh")); err != nil || st.Mode().Perm()&0o100 == 0 {
		t.Errorf("run.sh lost its mode: %v %v", st, err)
	}
	if l, err := os.Readlink(filepath.Join(out, "link")); err != nil || l != "run.sh" {
		t.Errorf("link = %q, %v", l, err)
	}

	// A single file to a new name, and into an existing directory.
	must(t, os.WriteFile(filepath.Join(host, "one.txt"), []byte("one\n"), 0o600))
	if _, err := boxctl(nil, "cp", filepath.Join(host, "one.txt"), id+":/tmp/renamed.txt"); err != nil {
		t.Fatal(err)
	}
	if got := sh(t, id, "cat /tmp/renamed.txt"); got != "one\n" {
		t.Errorf("renamed file = %q", got)
	}
	if _, err := boxctl(nil, "cp", id+":/tmp/renamed.txt", host); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(host, "renamed.txt")); string(b) != "one\n" {
		t.Errorf("copied out file = %q", b)
	}

	// Missing paths are clear errors.
	if _, stderr, code := boxctlRun("cp", id+":/nope", host); code == 0 || !strings.Contains(stderr, "not_found") {
		t.Errorf("cp out of a missing path: exit %d, %q", code, stderr)
	}
	if _, stderr, code := boxctlRun("cp", filepath.Join(host, "one.txt"), id+":/no/such/dir/x"); code == 0 || !strings.Contains(stderr, "no such") {
		t.Errorf("cp into a missing dir: exit %d, %q", code, stderr)
	}
}

// TestCopyNeverLeavesTheSandbox: symlinks made by sandbox code point into the
// sandbox's own root, whatever they say; one whose target leads out of the
// copied tree does not come out onto the host (the copy fails, or with
// --safe-links leaves it out), because there it would point at host files.
func TestCopyNeverLeavesTheSandbox(t *testing.T) {
	id := newSandbox(t)
	host := t.TempDir()
	marker := filepath.Join(host, "host-secret")
	must(t, os.WriteFile(marker, []byte("host secret\n"), 0o600))

	// A symlink to a host path resolves inside the sandbox, where it does
	// not exist: copying it out yields neither the host file nor the link.
	sh(t, id, "ln -s "+marker+" /workspace/steal && ln -s / /workspace/root")
	out := filepath.Join(host, "out")
	must(t, os.Mkdir(out, 0o755))
	_, stderr, code := boxctlRun("cp", id+":/workspace/steal", out)
	if code != 1 || !strings.Contains(stderr, `entry "steal"`) || !strings.Contains(stderr, "points outside") {
		t.Errorf("cp of a link to a host path: exit %d, stderr %q; want 1, naming the entry", code, stderr)
	}
	if _, stderr, code := boxctlRun("cp", "--safe-links", id+":/workspace/steal", out); code != 0 || !strings.Contains(stderr, "left out symlink") {
		t.Errorf("cp --safe-links of a link to a host path: exit %d, stderr %q; want 0 and a warning", code, stderr)
	}
	if names, _ := os.ReadDir(out); len(names) != 0 {
		t.Errorf("out holds %v, want nothing", names)
	}
	// Copying into a path through a sandbox symlink to / writes inside the
	// sandbox's root, not the host's.
	must(t, os.WriteFile(filepath.Join(host, "planted"), []byte("x"), 0o644))
	if _, err := boxctl(nil, "cp", filepath.Join(host, "planted"), id+":/workspace/root/tmp/"); err != nil {
		t.Fatal(err)
	}
	if got := sh(t, id, "cat /tmp/planted"); got != "x" {
		t.Errorf("planted inside = %q", got)
	}
	if _, err := os.Stat("/tmp/planted"); err == nil {
		t.Errorf("copy through a sandbox symlink wrote on the host")
	}
	// A tree whose symlink points at the host's directory: refused, and
	// with --safe-links copied without it.
	sh(t, id, "mkdir -p /workspace/evil && echo ok > /workspace/evil/f && ln -s "+host+" /workspace/evil/esc")
	evil := filepath.Join(host, "evilcopy")
	if _, stderr, code := boxctlRun("cp", id+":/workspace/evil", evil); code != 1 || !strings.Contains(stderr, `entry "evil/esc"`) {
		t.Errorf("cp of a tree with a link out: exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Lstat(evil); err == nil {
		t.Errorf("the refused copy left %s", evil)
	}
	if _, err := boxctl(nil, "cp", "--safe-links", id+":/workspace/evil", evil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(evil, "esc")); err == nil {
		t.Errorf("evilcopy/esc exists")
	}
	if b, _ := os.ReadFile(filepath.Join(evil, "f")); string(b) != "ok\n" {
		t.Errorf("evilcopy/f = %q", b)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A copy that fills the sandbox's disk fails with resource_exhausted,
// naming the cause, and leaves the disk as it was: the file it was to
// replace intact and no partial file taking the space.
func TestCopyInFullDisk(t *testing.T) {
	id := newSandbox(t)
	sh(t, id, "echo old > /tmp/big")
	host := filepath.Join(t.TempDir(), "big")
	// /tmp is a 64 MiB tmpfs (oci.DefaultTmpSizeBytes).
	must(t, os.WriteFile(host, make([]byte, 70<<20), 0o644))
	_, stderr, code := boxctlRun("cp", host, id+":/tmp/")
	if code == 0 || !strings.Contains(stderr, "resource_exhausted") || !strings.Contains(stderr, "no space left on device") {
		t.Errorf("cp of 70 MiB into a 64 MiB /tmp: exit %d, stderr %q; want resource_exhausted, no space left on device", code, stderr)
	}
	if got := sh(t, id, "ls -A /tmp; cat /tmp/big; df -k /tmp | awk 'NR==2 {print ($3 < 1024)}'"); got != "big\nold\n1\n" {
		t.Errorf("/tmp after the failed copy (names, big's content, under 1 MiB used?): %q", got)
	}
}
