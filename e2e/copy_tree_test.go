//go:build linux

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// A tree copied in arrives with the archive's modes, owned by the
// sandbox's root (the init's own identity; nothing is chowned to the
// host's ids), with no hidden temporary names left, whether it goes to a
// new name (built hidden and renamed into place at the end, its files
// created at their names) or over an existing tree (file by file, each
// through a temporary name). And it comes back out the same.
func TestCopyTreeOwnersAndModes(t *testing.T) {
	id := newSandbox(t)
	host := t.TempDir()
	src := filepath.Join(host, "src")
	must(t, os.MkdirAll(filepath.Join(src, "priv"), 0o755))
	must(t, os.MkdirAll(filepath.Join(src, "pub", "deep"), 0o755))
	files := map[string]os.FileMode{"a.txt": 0o644, "run.sh": 0o755, "priv/key": 0o600, "pub/deep/g": 0o640, "pub/x": 0o444}
	for rel, mode := range files {
		p := filepath.Join(src, rel)
		must(t, os.WriteFile(p, []byte(rel), 0o600))
		must(t, os.Chmod(p, mode))
	}
	must(t, os.Chmod(filepath.Join(src, "priv"), 0o700))
	want := "0:0 644 ./a.txt\n0:0 700 ./priv\n0:0 600 ./priv/key\n0:0 755 ./pub\n0:0 755 ./pub/deep\n0:0 640 ./pub/deep/g\n0:0 444 ./pub/x\n0:0 755 ./run.sh\n"
	list := func(dir string) string {
		return sh(t, id, fmt.Sprintf("cd %s && find . -mindepth 1 | sort | xargs stat -c '%%u:%%g %%a %%n'", dir))
	}
	// As a new name, then into /workspace, where src now exists.
	for i, dest := range []string{"/workspace/src", "/workspace"} {
		if _, err := boxctl(nil, "cp", src, id+":"+dest); err != nil {
			t.Fatalf("copy %d: %v", i, err)
		}
		if got := list("/workspace/src"); got != want {
			t.Errorf("copy %d: got\n%swant\n%s", i, got, want)
		}
		if got := sh(t, id, "cat /workspace/src/priv/key; echo; ls -A /workspace /workspace/src | grep -c boxd || true"); got != "priv/key\n0\n" {
			t.Errorf("copy %d: content or hidden names: %q", i, got)
		}
	}
	out := filepath.Join(host, "back")
	if _, err := boxctl(nil, "cp", id+":/workspace/src", out); err != nil {
		t.Fatal(err)
	}
	for rel, mode := range files {
		st, err := os.Lstat(filepath.Join(out, rel))
		if err != nil || st.Mode().Perm() != mode {
			t.Errorf("out %s: %v %v, want %v", rel, st.Mode(), err, mode)
		}
	}
}
