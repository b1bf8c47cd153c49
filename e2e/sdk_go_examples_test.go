//go:build linux

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/boxd-dev/boxd/internal/testenv"
)

// TestSDKGoExamples builds and runs each Go example under sdk/go/examples
// (a task sandbox and an agent's code tool on the Go SDK) against the test
// daemon: each exits non-zero if it did not do what it claims, and ends
// with "<its directory's name> OK".
func TestSDKGoExamples(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "sdk", "go", "examples", "*"))
	if err != nil || len(dirs) < 2 {
		t.Fatalf("examples: %v %v", dirs, err)
	}
	bin := t.TempDir()
	for _, dir := range dirs {
		name := filepath.Base(dir)
		t.Run(name, func(t *testing.T) {
			c, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			exe := filepath.Join(bin, name)
			build := exec.CommandContext(c, "go", "build", "-o", exe, "./sdk/go/examples/"+name)
			build.Dir = testenv.RepoRoot()
			if out, err := build.CombinedOutput(); err != nil {
				t.Fatalf("build %s: %v\n%s", name, err, out)
			}
			run := exec.CommandContext(c, exe)
			run.Env = append(os.Environ(), "BOXD_SOCKET="+env.socket, "BOXD_TEST_IMAGE="+testImage)
			out, err := run.CombinedOutput()
			t.Logf("%s:\n%s", name, out)
			if err != nil || !strings.HasSuffix(string(out), name+" OK\n") {
				t.Fatalf("%s: %v; want its output to end with %q", name, err, name+" OK")
			}
		})
	}
}

// TestSDKGo runs the Go SDK's tests (sdk/go/boxd, a module of its own)
// against the test daemon: every SDK call on a real sandbox, typed errors,
// a 9 MiB file both ways, and that its module graph has no containerd.
func TestSDKGo(t *testing.T) {
	c, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(c, "go", "test", "-count=1", "-v", "./...")
	cmd.Dir = filepath.Join(testenv.RepoRoot(), "sdk", "go", "boxd")
	cmd.Env = append(os.Environ(), "BOXD_SOCKET="+env.socket, "BOXD_TEST_IMAGE="+testImage)
	out, err := cmd.CombinedOutput()
	t.Logf("go test in sdk/go/boxd:\n%s", out)
	if err != nil {
		t.Fatalf("the Go SDK's tests: %v", err)
	}
	if strings.Contains(string(out), "--- SKIP") {
		t.Fatal("a Go SDK test was skipped")
	}
}
