//go:build linux

package e2e

import (
	"bufio"
	"context"
	"io"
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
//
// BOXD_SDK_PYTHON_PATTERN (default test*.py) picks test files by name, for
// a developer's targeted run.
func TestSDKPython(t *testing.T) {
	pattern := os.Getenv("BOXD_SDK_PYTHON_PATTERN")
	if pattern == "" {
		pattern = "test*.py"
	}
	out := runPython(t, 8*time.Minute, "-m", "unittest", "discover", "-v", "-s", "tests", "-p", pattern)
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

// TestSDKPythonDaemonRestart kills boxd while the Python SDK holds a
// streaming exec and a half-read file (HTTP/1.1) open, then starts it
// again: both must fail with boxd.Unavailable (no hang), and the same
// client must reach the new boxd,
// with the sandbox and its background process intact
// (sdk/python/tests/restart_client.py).
func TestSDKPythonDaemonRestart(t *testing.T) {
	dir := filepath.Join(testenv.RepoRoot(), "sdk", "python", "tests")
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(c, python, "restart_client.py")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "BOXD_SOCKET="+env.socket, "BOXD_TEST_IMAGE="+testImage,
		"PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	lines := bufio.NewScanner(stdout)
	var id string
	for lines.Scan() {
		out.WriteString(lines.Text() + "\n")
		if f := strings.Fields(lines.Text()); len(f) == 2 && f[0] == "ready" {
			id = f[1]
			break
		}
	}
	if id == "" {
		_ = cmd.Wait()
		t.Fatalf("the client never got ready:\n%s%s", out.String(), stderr.String())
	}
	t.Cleanup(func() { _, _ = boxctl(nil, "rm", "-f", id) })

	killDaemon()
	if err := startDaemon(); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(stdin, "restarted\n"); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(stdout)
	out.Write(rest)
	err = cmd.Wait()
	t.Logf("python:\n%s%s", out.String(), stderr.String())
	if err != nil || !strings.Contains(out.String(), "stream failed after") ||
		!strings.Contains(out.String(), "read failed after") || !strings.HasSuffix(out.String(), "OK\n") {
		t.Fatalf("restart client: %v\n%s%s", err, out.String(), stderr.String())
	}
}
