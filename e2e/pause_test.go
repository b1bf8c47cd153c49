//go:build linux

package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/containerd/cgroups/v3"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// cgroupCPU reads a sandbox's CPU time in nanoseconds straight from its
// cgroup (v1 cpuacct.usage, v2 cpu.stat usage_usec), not through boxd.
func cgroupCPU(t *testing.T, id string) uint64 {
	t.Helper()
	if cgroups.Mode() == cgroups.Unified {
		b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", namespace, id, "cpu.stat"))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
				n, _ := strconv.ParseUint(v, 10, 64)
				return n * 1000
			}
		}
		t.Fatal("no usage_usec in cpu.stat")
	}
	b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/cpuacct", namespace, id, "cpuacct.usage"))
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// waitCPUProgress waits until the sandbox has used at least d more CPU
// time than from, and fails after timeout.
func waitCPUProgress(t *testing.T, id string, from uint64, d time.Duration, timeout time.Duration) uint64 {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		now := cgroupCPU(t, id)
		if now >= from+uint64(d) {
			return now
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s used %v of CPU in %v, want at least %v", id, time.Duration(now-from), timeout, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPauseFreezesAndSurvivesRestart: a paused sandbox's CPU burner makes
// no progress (the cgroup's own CPU counter stands still), its processes
// are kept, exec and file calls are refused with failed_precondition
// unless exec asks to resume, a second pause is refused, and the pause
// holds across a boxd SIGKILL and restart without being "repaired" as a
// dead init.
func TestPauseFreezesAndSurvivesRestart(t *testing.T) {
	id := newSandbox(t, "--cpus", "0.5")
	burner, err := boxctl(nil, "exec", "-d", id, "--", "sh", "-c", "while :; do :; done")
	if err != nil {
		t.Fatal(err)
	}
	burner = strings.TrimSpace(burner)
	waitCPUProgress(t, id, cgroupCPU(t, id), 100*time.Millisecond, 20*time.Second)
	initPid := inspect(t, id).InitPid

	if out, err := boxctl(nil, "pause", id); err != nil || strings.TrimSpace(out) != id {
		t.Fatalf("pause: %q %v", out, err)
	}
	sb := inspect(t, id)
	if sb.State != "paused" || sb.PauseReason != "user" || sb.PausedAt == "" {
		t.Fatalf("after pause: state %q reason %q at %q", sb.State, sb.PauseReason, sb.PausedAt)
	}
	frozen := func(when string) {
		t.Helper()
		a := cgroupCPU(t, id)
		time.Sleep(700 * time.Millisecond)
		if b := cgroupCPU(t, id); b != a {
			t.Fatalf("%s: the paused sandbox used %v of CPU in 700ms", when, time.Duration(b-a))
		}
	}
	frozen("after pause")

	_, stderr, code := boxctlRun("exec", id, "--", "true")
	if code != 125 || !strings.Contains(stderr, "failed_precondition") || !strings.Contains(stderr, "sandbox "+id+" is paused") {
		t.Errorf("exec in a paused sandbox: exit %d, stderr %q", code, stderr)
	}
	_, err = filesAPI().StatFile(ctx(t), connect.NewRequest(&boxdv1.StatFileRequest{SandboxId: id, Path: "/etc"}))
	wantCode(t, "stat in a paused sandbox", err, connect.CodeFailedPrecondition, "is paused")
	_, stderr, code = boxctlRun("pause", id)
	if code == 0 || !strings.Contains(stderr, "failed_precondition") || !strings.Contains(stderr, "already paused") {
		t.Errorf("second pause: exit %d, stderr %q", code, stderr)
	}

	killDaemon()
	if err := startDaemon(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // a few reconcile passes (every 300 ms)
	sb = inspect(t, id)
	if sb.State != "paused" || sb.InitPid != initPid || sb.InitRestarts != 0 {
		t.Fatalf("after a boxd restart: state %q init %d (was %d) restarts %d", sb.State, sb.InitPid, initPid, sb.InitRestarts)
	}
	frozen("after a boxd restart")
	if _, stderr, code = boxctlRun("exec", id, "--", "true"); code != 125 || !strings.Contains(stderr, "is paused") {
		t.Errorf("exec after restart: exit %d, stderr %q", code, stderr)
	}

	// exec --resume thaws first; the burner was kept and runs again.
	out, stderr, code := boxctlRun("exec", "--resume", id, "--", "echo", "hi")
	if code != 0 || out != "hi\n" {
		t.Fatalf("exec --resume: exit %d, %q %q", code, out, stderr)
	}
	if st := inspect(t, id).State; st != "running" {
		t.Errorf("after exec --resume: state %q", st)
	}
	waitCPUProgress(t, id, cgroupCPU(t, id), 100*time.Millisecond, 20*time.Second)
	if ps, err := boxctl(nil, "ps", id); err != nil || !strings.Contains(ps, burner) {
		t.Errorf("the burner %s is gone after pause and resume: %q %v", burner, ps, err)
	}

	// pause/unpause by boxctl; unpause of a running sandbox is refused.
	if _, err := boxctl(nil, "pause", id); err != nil {
		t.Fatal(err)
	}
	frozen("second pause")
	if _, err := boxctl(nil, "unpause", id); err != nil {
		t.Fatal(err)
	}
	waitCPUProgress(t, id, cgroupCPU(t, id), 100*time.Millisecond, 20*time.Second)
	_, stderr, code = boxctlRun("unpause", id)
	if code == 0 || !strings.Contains(stderr, "failed_precondition") || !strings.Contains(stderr, "not paused") {
		t.Errorf("unpause of a running sandbox: exit %d, stderr %q", code, stderr)
	}
	_, stderr, code = boxctlRun("pause", "no-such-sandbox")
	if code == 0 || !strings.Contains(stderr, "not_found") {
		t.Errorf("pause of a missing sandbox: exit %d, stderr %q", code, stderr)
	}
}

// TestPausedSandboxExpires: the TTL still applies to a paused sandbox, and
// its frozen processes do not hold up the delete.
func TestPausedSandboxExpires(t *testing.T) {
	out, err := boxctl(nil, "create", "--ttl", "3s")
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(out)
	t.Cleanup(func() { boxctl(nil, "rm", "-f", id) })
	if _, err := boxctl(nil, "exec", "-d", id, "--", "sleep", "600"); err != nil {
		t.Fatal(err)
	}
	if _, err := boxctl(nil, "pause", id); err != nil {
		t.Fatal(err)
	}
	if !expired(id, 20*time.Second) {
		t.Fatalf("paused sandbox %s outlived its ttl: %+v", id, inspect(t, id))
	}
	assertGone(t, id)
}

// TestDeletePaused: rm of a paused sandbox thaws and kills it.
func TestDeletePaused(t *testing.T) {
	out, err := boxctl(nil, "create")
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(out)
	if _, err := boxctl(nil, "pause", id); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := boxctl(nil, "rm", id); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("rm of a paused sandbox hangs")
	}
	assertGone(t, id)
}

// TestCommitKeepsPause: a commit of a paused sandbox (which freezes and
// thaws what it commits) leaves it paused; right after a commit of a
// running one, exec works (the commit's own freeze is not a pause).
func TestCommitKeepsPause(t *testing.T) {
	const ref = "committed/paused:v1"
	id := newSandbox(t)
	sh(t, id, "echo kept > /workspace/f")
	t.Cleanup(func() { boxctl(nil, "image", "rm", "--force", ref) })
	if _, err := boxctl(nil, "pause", id); err != nil {
		t.Fatal(err)
	}
	if out, err := boxctl(nil, "commit", id, ref); err != nil || !strings.HasPrefix(out, ref+"\t") {
		t.Fatalf("commit of a paused sandbox: %q %v", out, err)
	}
	if sb := inspect(t, id); sb.State != "paused" || sb.PauseReason != "user" {
		t.Fatalf("after a commit: state %q reason %q", sb.State, sb.PauseReason)
	}
	if _, err := boxctl(nil, "unpause", id); err != nil {
		t.Fatal(err)
	}
	if _, err := boxctl(nil, "commit", "--force", id, ref); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		if got := sh(t, id, "cat /workspace/f"); got != "kept\n" {
			t.Fatalf("exec after a commit: %q", got)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
