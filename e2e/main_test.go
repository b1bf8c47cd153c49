//go:build linux

// Package e2e tests boxd end to end: a real boxd process on a private
// containerd with Debian's runc, driven through its API and through boxctl,
// as users drive it.
package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"golang.org/x/sys/unix"

	"github.com/boxd-dev/boxd/internal/rpcclient"
	"github.com/boxd-dev/boxd/internal/testenv"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
)

const (
	// restartLimit is how many times the test daemon restarts a sandbox's
	// dead init per minute (--restart-limit); small, so a storm test is quick.
	restartLimit = 3
	namespace    = "boxd-e2e"
	testImage    = "boxd/busybox:latest"
)

// env is the shared environment of the test binary.
var env struct {
	ctrd                  *testenv.Containerd
	dir                   string
	boxd, boxctl, initBin string
	socket, stateDir      string
	busybox               string
	daemon                *exec.Cmd
	daemonLog             string
	api                   boxdv1connect.SandboxServiceClient
	ctr                   *client.Client
}

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	// Descriptors this binary inherited (a flock(1) lock serializing test
	// runs, a CI runner's pipes) must not leak into the daemons the tests
	// start: a daemon orphaned by a timed-out run would hold them forever.
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: close-on-exec for inherited descriptors:", err)
		return 1
	}
	skip, err := testenv.Require()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	if skip {
		return 0
	}
	if err := setup(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e setup:", err)
		teardown()
		return 1
	}
	code := m.Run()
	if err := teardown(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e teardown:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

func setup() error {
	var err error
	env.dir, err = os.MkdirTemp("", "boxd-e2e-")
	if err != nil {
		return err
	}
	if env.ctrd, err = testenv.StartContainerd(); err != nil {
		return err
	}
	if env.boxd, env.boxctl, env.initBin, err = testenv.BuildBinaries(filepath.Join(env.dir, "bin")); err != nil {
		return err
	}
	if env.busybox, err = testenv.BusyboxRootfs(); err != nil {
		return err
	}
	env.socket = filepath.Join(env.dir, "run", "boxd.sock")
	env.stateDir = filepath.Join(env.dir, "state")
	env.daemonLog = filepath.Join(env.dir, "boxd.log")
	if err := startDaemon(); err != nil {
		return err
	}
	env.api = rpcclient.New(env.socket)
	if env.ctr, err = client.New(env.ctrd.Address, client.WithDefaultNamespace(namespace)); err != nil {
		return err
	}
	if out, err := boxctl(nil, "image", "import", "--rootfs", env.busybox, "--name", testImage); err != nil {
		return fmt.Errorf("import busybox: %v: %s", err, out)
	}
	return nil
}

// startDaemon starts boxd and waits until its socket answers.
func startDaemon() error {
	logf, err := os.OpenFile(env.daemonLog, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(env.boxd,
		"--socket", env.socket, "--containerd", env.ctrd.Address, "--namespace", namespace,
		"--state-dir", env.stateDir, "--default-image", testImage, "--init-binary", env.initBin,
		"--runc", testenv.Runc, "--expiry-interval", "300ms", "--restart-limit", fmt.Sprintf("%d/1m", restartLimit), "--debug",
		// The pool has its own tests (pool_test.go); the others see creates as before.
		"--warm-pool", "0")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	logf.Close()
	env.daemon = cmd
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("unix", env.socket); err == nil {
			c.Close()
			return nil
		}
		if cmd.ProcessState != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("boxd did not start listening on %s:\n%s", env.socket, tail(env.daemonLog))
}

// killDaemon SIGKILLs boxd, as a crash would.
func killDaemon() {
	if env.daemon != nil && env.daemon.Process != nil {
		_ = env.daemon.Process.Signal(syscall.SIGKILL)
		_, _ = env.daemon.Process.Wait()
		env.daemon = nil
	}
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

func teardown() error {
	var errs []error
	if env.ctr != nil {
		// Every test cleans up after itself: anything left is a leak.
		ctx := namespaces.WithNamespace(context.Background(), namespace)
		// A background delete (boxctl run) may still be tearing down what
		// the last test ran: wait for those, and only those, to finish.
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if ctrs, err := env.ctr.Containers(ctx, `labels."boxd.io/deleting"`); err != nil || len(ctrs) == 0 {
				break
			}
		}
		if ctrs, err := env.ctr.Containers(ctx); err == nil && len(ctrs) > 0 {
			var ids []string
			for _, c := range ctrs {
				ids = append(ids, c.ID())
			}
			errs = append(errs, fmt.Errorf("sandboxes left behind by tests: %v", ids))
		}
	}
	if env.daemon != nil && env.daemon.Process != nil {
		_ = env.daemon.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _, _ = env.daemon.Process.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			killDaemon()
			errs = append(errs, errors.New("boxd did not stop within 10s of SIGTERM"))
		}
	}
	if env.ctr != nil {
		env.ctr.Close()
	}
	if env.ctrd != nil {
		if err := env.ctrd.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if env.dir != "" {
		if err := testenv.ReleaseGvisorRoots(env.dir); err != nil {
			errs = append(errs, err)
		}
	}
	if env.dir != "" && len(errs) == 0 {
		os.RemoveAll(env.dir)
	} else if env.dir != "" {
		fmt.Fprintf(os.Stderr, "e2e: kept %s for inspection; boxd log tail:\n%s\n", env.dir, tail(env.daemonLog))
	}
	return errors.Join(errs...)
}

// boxctl runs the CLI against the test daemon and returns stdout; stderr is
// folded into the error.
func boxctl(stdin []byte, args ...string) (string, error) {
	cmd := exec.Command(env.boxctl, append([]string{"--socket", env.socket}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	err := cmd.Run()
	if err != nil {
		return stdout.String(), fmt.Errorf("boxctl %s: %w; stderr: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// boxctlRun returns stdout, stderr and the exit code.
func boxctlRun(args ...string) (string, string, int) { return boxctlAt(env.socket, args...) }

// boxctlAt runs boxctl against the daemon at socket and returns stdout,
// stderr and the exit code (-1 if it could not run).
func boxctlAt(socket string, args ...string) (string, string, int) {
	cmd := exec.Command(env.boxctl, append([]string{"--socket", socket}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		code = -1
	}
	return stdout.String(), stderr.String(), code
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// newSandbox creates a sandbox through boxctl and deletes it when the test
// ends.
func newSandbox(t *testing.T, args ...string) string {
	t.Helper()
	out, err := boxctl(nil, append([]string{"create"}, args...)...)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	id := strings.TrimSpace(out)
	if len(id) != 12 {
		t.Fatalf("create printed %q, want a 12-character id", out)
	}
	t.Cleanup(func() {
		if _, err := boxctl(nil, "rm", "-f", id); err != nil {
			t.Errorf("cleanup rm %s: %v", id, err)
		}
	})
	return id
}

// sh runs a shell snippet in a sandbox and fails the test on a non-zero exit.
func sh(t *testing.T, id, script string) string {
	t.Helper()
	out, stderr, code := boxctlRun("exec", id, "--", "sh", "-c", script)
	if code != 0 {
		t.Fatalf("exec %q: exit %d, stderr %q, stdout %q", script, code, stderr, out)
	}
	return out
}
