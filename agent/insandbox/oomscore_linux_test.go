//go:build linux

package insandbox

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// TestOOMScoreFork: a child forked through oomScore starts at the
// commands' score while the parent keeps its own.
func TestOOMScoreFork(t *testing.T) {
	own, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(own)) == "1000" {
		t.Fatalf("the test process already runs at 1000; nothing to check")
	}
	var o oomScore
	if err := o.setUp(); err != nil {
		t.Fatal(err)
	}
	defer o.f.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	attr := &syscall.ProcAttr{Files: []uintptr{0, w.Fd(), 2}}
	pid, err := o.fork(func() (int, error) {
		return syscall.ForkExec(sh, []string{"sh", "-c", "cat /proc/self/oom_score_adj"}, attr)
	})
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	out.ReadFrom(r)
	var ws syscall.WaitStatus
	syscall.Wait4(pid, &ws, 0, nil)
	if got := strings.TrimSpace(out.String()); got != "1000" {
		t.Errorf("child's score %q, want 1000", got)
	}
	if now, _ := os.ReadFile("/proc/self/oom_score_adj"); !bytes.Equal(now, own) {
		t.Errorf("parent's score %q after the fork, want %q back", now, own)
	}
}
