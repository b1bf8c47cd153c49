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
// (a task sandbox and an agent's code tool on rpc/client) against the test
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
