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

// python is Debian's interpreter, with the python3-grpcio and
// python3-protobuf packages scripts/setup.sh installs: the SDK is tested with
// what CI has, never with a user's virtualenv.
const python = "/usr/bin/python3"

// runPython runs the Python interpreter from sdk/python against the test
// daemon and fails the test, showing all its output, on a non-zero exit.
func runPython(t *testing.T, timeout time.Duration, args ...string) string {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(c, python, args...)
	cmd.Dir = filepath.Join(testenv.RepoRoot(), "sdk", "python")
	cmd.Env = append(os.Environ(),
		"BOXD_SOCKET="+env.socket,
		"BOXD_TEST_IMAGE="+testImage,
		"PYTHONPATH="+cmd.Dir,
		"PYTHONDONTWRITEBYTECODE=1",
		"PYTHONUNBUFFERED=1",
	)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", python, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestSDKPython runs the Python SDK's unittest suite (sdk/python/tests)
// against the real boxd: every SDK call, and bad input (a dead socket, an
// unknown id, non-UTF-8 output, timeouts that must kill the command).
func TestSDKPython(t *testing.T) {
	out := runPython(t, 8*time.Minute, "-m", "unittest", "discover", "-v", "-s", "tests")
	t.Logf("python tests:\n%s", out)
	if !strings.Contains(out, "\nOK") {
		t.Fatalf("unittest did not report OK:\n%s", out)
	}
	if strings.Contains(out, "skipped") {
		t.Fatalf("a Python test was skipped:\n%s", out)
	}
}

// TestSDKPythonExamples runs each example under sdk/python/examples: each
// one exits non-zero if it did not do what it claims.
func TestSDKPythonExamples(t *testing.T) {
	examples, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "sdk", "python", "examples", "*.py"))
	if err != nil || len(examples) == 0 {
		t.Fatalf("no examples found: %v", err)
	}
	for _, ex := range examples {
		t.Run(filepath.Base(ex), func(t *testing.T) {
			t.Logf("%s", runPython(t, 2*time.Minute, ex))
		})
	}
}
