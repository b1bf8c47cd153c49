//go:build linux

package insandbox

import (
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A child that exited before anyone watched its pidfd must still be seen:
// the poller drops a readiness event that arrives before the first wait.
func TestWaitExitedAfterExit(t *testing.T) {
	pid, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Wait4(pid, nil, 0, nil)
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != nil {
		t.Fatal(err) // now a zombie
	}
	pidfd := openPidfd(pid)
	if pidfd == nil {
		t.Fatal("pidfd_open failed: pidfds need Linux 5.3+ (without them the init falls back to SIGCHLD)")
	}
	defer pidfd.Close()
	done := make(chan bool, 1)
	go func() { done <- waitExited(pidfd) }()
	select {
	case polled := <-done:
		if !polled {
			t.Error("pidfd not on the poller")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waitExited missed an exit that happened before it was called")
	}
}

// The per-server reaper (no wait4(-1)) reaps its children through pidfds:
// spawn, then the exit status, for many children at once.
func TestPidReaperReapsConcurrentChildren(t *testing.T) {
	r := newPidReaper()
	var kids []*child
	for i := range 20 {
		c, err := r.spawn(func() (int, error) {
			return syscall.ForkExec("/bin/sh", []string{"sh", "-c", "exit " + string(rune('0'+i%5))}, &syscall.ProcAttr{})
		})
		if err != nil {
			t.Fatal(err)
		}
		kids = append(kids, c)
	}
	for i, c := range kids {
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			t.Fatalf("child %d (pid %d) never reaped", i, c.pid)
		}
		if c.lost || c.status.ExitStatus() != i%5 {
			t.Errorf("child %d: lost %v, exit %d, want %d", i, c.lost, c.status.ExitStatus(), i%5)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.live) != 0 {
		t.Errorf("%d children still registered", len(r.live))
	}
}

// A fork refused with EAGAIN (the sandbox's pids cgroup full) says which
// limit, and stays EAGAIN for the wire's resource_exhausted.
func TestSpawnEAGAINNamesThePidsLimit(t *testing.T) {
	_, err := newPidReaper().spawn(func() (int, error) { return 0, syscall.EAGAIN })
	if !errors.Is(err, syscall.EAGAIN) || !strings.Contains(err.Error(), "pids limit (limits.pids)") {
		t.Fatalf("spawn: %v, want EAGAIN naming the pids limit", err)
	}
}
