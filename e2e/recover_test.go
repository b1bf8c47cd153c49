//go:build linux

package e2e

import (
	"syscall"
	"testing"
	"time"
)

// TestDeadInitIsRestarted: when a sandbox's init dies (killed from the
// host, or a host reboot), boxd starts a new one on the same writable layer:
// processes are lost, files are not, and exec works again.
func TestDeadInitIsRestarted(t *testing.T) {
	id := newSandbox(t)
	sh(t, id, "echo kept > /workspace/file")
	pid := inspect(t, id).InitPid
	if err := syscall.Kill(int(pid), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		sb := inspect(t, id)
		if sb.State == "running" && sb.InitPid != pid {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox not restarted 20s after its init died: state %s pid %d", sb.State, sb.InitPid)
		}
		time.Sleep(5 * time.Millisecond) // short, so the exec below lands while the new init starts
	}
	if got := sh(t, id, "cat /workspace/file"); got != "kept\n" {
		t.Errorf("file after restart = %q", got)
	}
}
