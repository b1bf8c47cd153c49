//go:build linux

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// counterLoop is a background loop whose count lives in a shell variable:
// a restored sandbox keeps counting from where it was, a fresh one would
// start from 0.
const counterLoop = "i=0; while :; do i=$((i+1)); echo $i > /tmp/count.new; mv /tmp/count.new /tmp/count; sleep 0.05; done"

// TestCheckpointAutoResume: a checkpointed sandbox created with
// --auto-resume is restored by the next call into it, whichever: a file
// call and an exec arriving together both succeed (one restores, the
// other waits for it), the counter goes on from where it was, and the
// restore is recorded as a restored event with reason auto. A paused
// one is resumed the same way. Without --auto-resume the call is refused
// (TestCheckpointRestore).
func TestCheckpointAutoResume(t *testing.T) {
	start := time.Now().Add(-time.Millisecond)
	id := newSandbox(t, "--runtime", "gvisor", "--memory", "256m", "--disk", "64m", "--auto-resume")
	if !inspect(t, id).AutoResume {
		t.Fatal("inspect: auto_resume not set")
	}
	if _, err := boxctl(nil, "exec", "-d", id, "--", "sh", "-c", counterLoop); err != nil {
		t.Fatal(err)
	}
	before := waitCount(t, id, 3)
	checkpoint(t, id)
	if sb := inspect(t, id); sb.State != "checkpointed" {
		t.Fatalf("after checkpoint: state %q", sb.State)
	}

	t0 := time.Now()
	var wg sync.WaitGroup
	var statErr, execErr error
	var out string
	wg.Add(2)
	go func() {
		defer wg.Done()
		_, statErr = filesAPI().StatFile(ctx(t), connect.NewRequest(&boxdv1.StatFileRequest{SandboxId: id, Path: "/tmp/count"}))
	}()
	go func() {
		defer wg.Done()
		out, execErr = boxctl(nil, "exec", id, "--", "cat", "/tmp/count")
	}()
	wg.Wait()
	t.Logf("first calls after the checkpoint: %v", time.Since(t0))
	if statErr != nil || execErr != nil {
		t.Fatalf("calls on a checkpointed --auto-resume sandbox: stat %v; exec %v %q\nboxd log:\n%s", statErr, execErr, out, tail(env.daemonLog))
	}
	if n := waitCount(t, id, before); n < before {
		t.Errorf("counter %d after the auto-resume, was %d", n, before)
	}
	if sb := inspect(t, id); sb.State != "running" || sb.CheckpointBytes != 0 {
		t.Errorf("after the auto-resume: state %q, checkpoint %d bytes", sb.State, sb.CheckpointBytes)
	}
	evs := waitEvents(t, start, id, "checkpointed", "restored")
	if ev := find(evs, "restored"); ev.Attrs["reason"] != "auto" {
		t.Errorf("restored event: %v", ev)
	}
	if ev := find(evs, "checkpointed"); ev.Attrs["reason"] != "user" || ev.Attrs["bytes"] == "" {
		t.Errorf("checkpointed event: %v", ev)
	}
	var restores int
	for _, ev := range evs {
		if ev.Type == "restored" {
			restores++
		}
	}
	if restores != 1 {
		t.Errorf("%d restored events for two racing calls, want 1", restores)
	}

	// A pause: the next call resumes it too.
	if _, err := boxctl(nil, "pause", id); err != nil {
		t.Fatal(err)
	}
	if out, err := boxctl(nil, "exec", id, "--", "echo", "back"); err != nil || out != "back\n" {
		t.Fatalf("exec on a paused --auto-resume sandbox: %v %q", err, out)
	}
	if sb := inspect(t, id); sb.State != "running" {
		t.Errorf("after the exec: state %q", sb.State)
	}
}

// TestCheckpointOnIdle: --on-idle checkpoint writes an idle gVisor
// sandbox to disk and frees its memory (its cgroup is gone), records it
// (an idle event with action checkpoint, a checkpointed event with
// reason idle), and the next exec, with no --resume, restores it: the
// session keeps its cd and variable, a process started from it goes on
// counting. A runc sandbox asking for it is refused naming on_idle.
func TestCheckpointOnIdle(t *testing.T) {
	start := time.Now().Add(-time.Millisecond)
	id := newSandbox(t, "--runtime", "gvisor", "--memory", "256m", "--disk", "64m", "--tmpfs", "/dev/shm:128m",
		"--idle-timeout", "2s", "--on-idle", "checkpoint")
	if sb := inspect(t, id); sb.OnIdle != "checkpoint" || !sb.AutoResume {
		t.Fatalf("inspect: on_idle %q auto_resume %v", sb.OnIdle, sb.AutoResume)
	}
	if _, err := boxctl(nil, "session", "create", id, "s1"); err != nil {
		t.Fatal(err)
	}
	// A background job of the session, not a boxd process (exec -d): a
	// running boxd process keeps the sandbox in use.
	if _, err := boxctl(nil, "session", "exec", id, "s1", "cd /etc; export CK=kept; (sh -c '"+counterLoop+"' >/dev/null 2>&1 &)"); err != nil {
		t.Fatal(err)
	}
	sh(t, id, "head -c 100000000 /dev/urandom > /dev/shm/blob")
	usage := inspect(t, id).Usage.GetMemoryBytes()
	before := waitCount(t, id, 3)
	avail := memAvailable(t)
	waitState(t, id, "checkpointed", 30*time.Second)
	// The label comes first, the task's end after: the checkpointed
	// event says the checkpoint is done.
	evs := waitEvents(t, start, id, "idle", "checkpointed")
	// As in TestCheckpointRestore: the best reading of the host's
	// MemAvailable, other tests coming and going meanwhile; the sandbox's
	// processes and cgroup go with its task, over a moment on a loaded
	// host.
	freed := memAvailable(t) - avail
	for deadline := time.Now().Add(15 * time.Second); freed < int64(usage)*8/10 && time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		freed = max(freed, memAvailable(t)-avail)
	}
	t.Logf("idle checkpoint: the sandbox used %d MiB; MemAvailable rose by %d MiB", usage>>20, freed>>20)
	if freed < int64(usage)*8/10 {
		t.Errorf("MemAvailable rose by %d MiB, want at least 80%% of the %d MiB the sandbox used", freed>>20, usage>>20)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		_, err := os.Stat(memCgroupDir(id))
		if os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("the idle-checkpointed sandbox's memory cgroup %s is still there (%v)", memCgroupDir(id), err)
			break
		}
	}
	if ev := find(evs, "idle"); ev.Attrs["action"] != "checkpoint" {
		t.Errorf("idle event: %v", ev)
	}
	if ev := find(evs, "checkpointed"); ev.Attrs["reason"] != "idle" {
		t.Errorf("checkpointed event: %v", ev)
	}

	t0 := time.Now()
	out, stderr, code := boxctlRun("exec", id, "--", "cat", "/tmp/count")
	t.Logf("first exec after the idle checkpoint: %v", time.Since(t0))
	if code != 0 {
		t.Fatalf("exec after the idle checkpoint: exit %d %q %q\nboxd log:\n%s", code, out, stderr, tail(env.daemonLog))
	}
	if n := waitCount(t, id, before); n < before {
		t.Errorf("counter %d after the restore, was %d", n, before)
	}
	if out, err := boxctl(nil, "session", "exec", id, "s1", "pwd; echo $CK"); err != nil || out != "/etc\nkept\n" {
		t.Errorf("session after the restore: %q %v", out, err)
	}
	if ev := find(waitEvents(t, start, id, "restored"), "restored"); ev.Attrs["reason"] != "auto" {
		t.Errorf("restored event: %v", ev)
	}

	_, stderr, code = boxctlRun("create", "--runtime", "runc", "--idle-timeout", "1m", "--on-idle", "checkpoint")
	if code == 0 || !strings.Contains(stderr, "failed_precondition") || !strings.Contains(stderr, "on_idle") {
		t.Errorf("create --on-idle checkpoint on runc: exit %d, %q", code, stderr)
	}
}

// TestCheckpointForkWithProcesses: fork --with-processes is refused with
// failed_precondition naming why (gVisor: the pinned runsc restores only
// into the source's uid block; runc: CRIU), makes no sandbox, leaves no
// checkpoint and leaves the source running and counting.
func TestCheckpointForkWithProcesses(t *testing.T) {
	src := newSandbox(t, "--runtime", "gvisor", "--memory", "256m", "--disk", "64m")
	if _, err := boxctl(nil, "exec", "-d", src, "--", "sh", "-c", counterLoop); err != nil {
		t.Fatal(err)
	}
	before := waitCount(t, src, 3)
	n := len(listIDs(t))
	_, err := env.api.ForkSandbox(ctx(t), connect.NewRequest(&boxdv1.ForkSandboxRequest{SandboxId: src, Count: 2, WithProcesses: true}))
	if connect.CodeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), "with_processes") || !strings.Contains(err.Error(), "uid block") {
		t.Fatalf("fork --with-processes of a gVisor sandbox: %v; want failed_precondition naming with_processes and the uid block", err)
	}
	if got := len(listIDs(t)); got != n {
		t.Errorf("%d sandboxes after the refused fork, %d before", got, n)
	}
	if sb := inspect(t, src); sb.State != "running" {
		t.Errorf("the source after the refusal: state %q", sb.State)
	}
	waitCount(t, src, before)
	if _, err := os.Stat(filepath.Join(env.stateDir, "sandboxes", src, "checkpoint")); !os.IsNotExist(err) {
		t.Errorf("the refused fork left a checkpoint of the source (%v)", err)
	}
	runc := newSandbox(t, "--memory", "64m", "--disk", "64m")
	_, err = env.api.ForkSandbox(ctx(t), connect.NewRequest(&boxdv1.ForkSandboxRequest{SandboxId: runc, WithProcesses: true}))
	if connect.CodeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), "CRIU") {
		t.Errorf("fork --with-processes of a runc sandbox: %v; want failed_precondition naming CRIU", err)
	}
}
