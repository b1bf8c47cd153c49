//go:build linux

package e2e

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"

	"github.com/boxd-dev/boxd/internal/testenv"
)

// TestEmbeddedContainerd: boxd --containerd embedded with a private state
// dir, where no containerd socket exists, starts the pinned containerd
// itself, creates and execs; after a kill -9 of that containerd it is back
// within 5 s, the sandbox still execs and a new create works; SIGTERM to
// boxd stops it.
func TestEmbeddedContainerd(t *testing.T) {
	dir, err := os.MkdirTemp("", "bxemb") // short: the socket path is limited
	must(t, err)
	// Sandboxes' mapped root must traverse to their rootfs under it.
	must(t, os.Chmod(dir, 0o711))
	state, sock, logPath := filepath.Join(dir, "state"), filepath.Join(dir, "boxd.sock"), filepath.Join(dir, "boxd.log")
	ctrdDir := filepath.Join(state, "containerd")
	ctrdSock := filepath.Join(ctrdDir, "containerd.sock")
	if _, err := os.Stat(ctrdSock); err == nil {
		t.Fatalf("%s exists before boxd started", ctrdSock)
	}
	logf, err := os.Create(logPath)
	must(t, err)
	defer logf.Close()
	boxd := exec.Command(env.boxd, "--containerd", "embedded", "--socket", sock, "--state-dir", state,
		"--namespace", "boxd-e2e-emb", "--default-image", testImage, "--init-binary", env.initBin,
		"--runc", testenv.Runc, "--warm-pool", "0", "--debug")
	boxd.Stdout, boxd.Stderr = logf, logf
	must(t, boxd.Start())
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = boxd.Process.Signal(syscall.SIGTERM)
			_, _ = boxd.Process.Wait()
		}
		// Whatever is left (shims, mounts) goes the way the test
		// harness's own containerd goes: the layout is the same.
		if out, err := exec.Command("bash", filepath.Join(testenv.RepoRoot(), "scripts", "containerd.sh"), "stop", ctrdDir).CombinedOutput(); err != nil {
			t.Errorf("containerd.sh stop: %v\n%s", err, out)
		}
		if mps, _ := testenv.MountsUnder(dir); len(mps) == 0 {
			os.RemoveAll(dir)
		} else {
			t.Errorf("mounts left under %s: %v", dir, mps)
		}
	})
	waitSocket(t, sock, 40*time.Second, logPath)
	if !strings.Contains(tail(logPath), "embedded=true") {
		t.Fatalf("boxd did not say it runs an embedded containerd:\n%s", tail(logPath))
	}
	bx := func(args ...string) string {
		t.Helper()
		out, stderr, code := boxctlAt(sock, args...)
		if code != 0 {
			t.Fatalf("boxctl %s: exit %d: %s\nboxd log:\n%s", strings.Join(args, " "), code, stderr, tail(logPath))
		}
		return strings.TrimSpace(out)
	}
	bx("image", "import", "--rootfs", env.busybox, "--name", testImage)
	id := bx("create", "--memory", "64m")
	t.Cleanup(func() { _, _, _ = boxctlAt(sock, "rm", "-f", id) })
	if out := bx("exec", id, "--", "echo", "one"); out != "one" {
		t.Fatalf("exec: %q", out)
	}

	pid := ctrdPid(t, ctrdDir)
	if pg, _ := syscall.Getpgid(pid); pg != pid {
		t.Errorf("containerd %d is in process group %d, want its own", pid, pg)
	}
	must(t, syscall.Kill(pid, syscall.SIGKILL))
	killed := time.Now()
	// A call in the gap is unavailable, or (restarted already) succeeds.
	if _, stderr, code := boxctlAt(sock, "image", "ls"); code != 0 && !strings.Contains(stderr, "unavailable") {
		t.Errorf("image ls while containerd is down: exit %d, %s; want unavailable", code, stderr)
	}
	for {
		if p := ctrdPidOr0(ctrdDir); p != 0 && p != pid && serving(ctrdSock) {
			break
		}
		if time.Since(killed) > 5*time.Second {
			t.Fatalf("containerd not back within 5s of kill -9:\n%s", tail(logPath))
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("containerd back %v after kill -9", time.Since(killed).Round(time.Millisecond))
	if out := bx("exec", id, "--", "echo", "two"); out != "two" {
		t.Fatalf("exec after restart: %q", out)
	}
	var id2 string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		out, stderr, code := boxctlAt(sock, "create", "--memory", "64m")
		if code == 0 {
			id2 = strings.TrimSpace(out)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("create after restart: exit %d: %s", code, stderr)
		}
	}
	t.Cleanup(func() { _, _, _ = boxctlAt(sock, "rm", "-f", id2) })
	if out := bx("exec", id2, "--", "echo", "three"); out != "three" {
		t.Fatalf("exec in a sandbox made after the restart: %q", out)
	}
	bx("rm", "-f", id, id2)

	// boxd's SIGTERM stops its containerd.
	pid = ctrdPid(t, ctrdDir)
	must(t, boxd.Process.Signal(syscall.SIGTERM))
	_, _ = boxd.Process.Wait()
	stopped = true
	for deadline := time.Now().Add(12 * time.Second); syscall.Kill(pid, 0) == nil; time.Sleep(50 * time.Millisecond) {
		if comm, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm"); !bytes.HasPrefix(comm, []byte("containerd")) {
			break // gone; the pid was reused
		}
		if time.Now().After(deadline) {
			t.Fatalf("containerd %d still runs after boxd stopped", pid)
		}
	}
}

// TestContainerdMissingSocket: --containerd PATH never falls back; the
// error names both choices.
func TestContainerdMissingSocket(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(env.boxd, "--containerd", "/nonexistent.sock", "--state-dir", filepath.Join(dir, "state"),
		"--socket", filepath.Join(dir, "b.sock"), "--init-binary", env.initBin, "--runc", testenv.Runc, "--warm-pool", "0")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("boxd started without a containerd:\n%s", out)
	}
	for _, want := range []string{"/nonexistent.sock", "--containerd PATH", "--containerd embedded"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("error lacks %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "state", "containerd")); err == nil {
		t.Errorf("boxd started a containerd of its own anyway")
	}
}

func waitSocket(t *testing.T, sock string, d time.Duration, logPath string) {
	t.Helper()
	for deadline := time.Now().Add(d); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("boxd did not listen on %s:\n%s", sock, tail(logPath))
		}
	}
}

func ctrdPidOr0(dir string) int {
	b, _ := os.ReadFile(filepath.Join(dir, "containerd.pid"))
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

func ctrdPid(t *testing.T, dir string) int {
	t.Helper()
	pid := ctrdPidOr0(dir)
	if pid == 0 {
		t.Fatalf("no containerd.pid in %s", dir)
	}
	return pid
}

func serving(sock string) bool {
	c, err := client.New(sock, client.WithTimeout(time.Second))
	if err != nil {
		return false
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	ok, _ := c.IsServing(ctx)
	return ok
}
