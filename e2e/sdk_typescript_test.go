//go:build linux

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/boxd-dev/boxd/internal/testenv"
)

var (
	tsBuildOnce sync.Once
	tsBuildDir  string
	tsBuildErr  error
)

// tsBuild copies sdk/typescript (sources, tests, examples, bench) into a
// temporary directory next to the node_modules its committed lockfile pins
// (npm ci, cached by testenv.NodeModules) and compiles it there with the
// package's own tsc, so the repository never gets a dist/ or node_modules.
// Once per test binary.
func tsBuild(t *testing.T) string {
	t.Helper()
	tsBuildOnce.Do(func() {
		src := filepath.Join(testenv.RepoRoot(), "sdk", "typescript")
		mods, err := testenv.NodeModules(src)
		if err != nil {
			tsBuildErr = err
			return
		}
		// Under env.dir, which the e2e binary's teardown removes.
		dir := filepath.Join(env.dir, "ts-sdk")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			tsBuildErr = err
			return
		}
		cp := exec.Command("cp", "-r", filepath.Join(src, "package.json"), filepath.Join(src, "tsconfig.json"),
			filepath.Join(src, "src"), filepath.Join(src, "test"), filepath.Join(src, "examples"), filepath.Join(src, "bench"), dir)
		if out, err := cp.CombinedOutput(); err != nil {
			tsBuildErr = &cmdError{err: err, out: string(out)}
			return
		}
		if err := os.Symlink(mods, filepath.Join(dir, "node_modules")); err != nil {
			tsBuildErr = err
			return
		}
		tsc := exec.Command("node", filepath.Join(mods, "typescript", "bin", "tsc"), "-p", ".")
		tsc.Dir = dir
		if out, err := tsc.CombinedOutput(); err != nil {
			tsBuildErr = &cmdError{err: err, out: string(out)}
			return
		}
		tsBuildDir = dir
	})
	if tsBuildErr != nil {
		t.Fatalf("building the TypeScript SDK: %v", tsBuildErr)
	}
	return tsBuildDir
}

type cmdError struct {
	err error
	out string
}

func (e *cmdError) Error() string { return e.err.Error() + "\n" + e.out }

// runNode runs node in the built SDK directory against the test daemon and
// fails the test, showing all its output, on a non-zero exit.
func runNode(t *testing.T, dir string, timeout time.Duration, args ...string) string {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(c, "node", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "BOXD_SOCKET="+env.socket, "BOXD_TEST_IMAGE="+testImage)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestSDKTypeScript runs the TypeScript SDK's node:test suite
// (sdk/typescript/test) against the real boxd: every SDK call, and bad
// input (a dead socket, a sandbox deleted under running streams, non-UTF-8
// output, call timeouts that must cancel the command in the sandbox, 1 GiB
// through in bounded memory).
//
// BOXD_SDK_TS_PATTERN (default *.test.js) picks compiled test files by
// name, for a developer's targeted run.
func TestSDKTypeScript(t *testing.T) {
	dir := tsBuild(t)
	pattern := os.Getenv("BOXD_SDK_TS_PATTERN")
	if pattern == "" {
		pattern = "*.test.js"
	}
	tests, err := filepath.Glob(filepath.Join(dir, "dist", "test", pattern))
	if err != nil || len(tests) == 0 {
		t.Fatalf("no compiled tests in %s: %v", dir, err)
	}
	args := append([]string{"--test", "--test-concurrency=1", "--test-reporter=spec"}, tests...)
	out := runNode(t, dir, 8*time.Minute, args...)
	t.Logf("node --test:\n%s", out)
	counts := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^ℹ (tests|pass|fail|skipped|todo|cancelled) (\d+)$`).FindAllStringSubmatch(out, -1) {
		counts[m[1]] = m[2]
	}
	if counts["fail"] != "0" || counts["skipped"] != "0" || counts["todo"] != "0" || counts["cancelled"] != "0" || counts["pass"] == "" || counts["pass"] == "0" || counts["pass"] != counts["tests"] {
		t.Fatalf("node --test did not pass every test: %v", counts)
	}
}

// TestSDKTypeScriptExamples runs each example under sdk/typescript/examples:
// each one exits non-zero if it did not do what it claims.
func TestSDKTypeScriptExamples(t *testing.T) {
	dir := tsBuild(t)
	examples, err := filepath.Glob(filepath.Join(dir, "dist", "examples", "*.js"))
	if err != nil || len(examples) == 0 {
		t.Fatalf("no compiled examples in %s: %v", dir, err)
	}
	for _, ex := range examples {
		t.Run(filepath.Base(ex), func(t *testing.T) {
			out := runNode(t, dir, 2*time.Minute, ex)
			t.Logf("%s", out)
			if !strings.HasSuffix(out, "OK\n") {
				t.Fatalf("the example did not end with OK:\n%s", out)
			}
		})
	}
}
