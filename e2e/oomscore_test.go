//go:build linux

package e2e

import (
	"strings"
	"testing"
)

// TestOOMScores: commands run at oom_score_adj 1000 from their first
// instruction, children included, and the init at 500, so that a sandbox
// that fills its memory limit loses commands, never its init.
func TestOOMScores(t *testing.T) {
	id := newSandbox(t, "--memory", "32m")
	got := sh(t, id, `cat /proc/1/oom_score_adj /proc/self/oom_score_adj; sh -c 'cat /proc/self/oom_score_adj'`)
	if got != "500\n1000\n1000\n" {
		t.Errorf("init, command, child scores %q, want 500, 1000, 1000", got)
	}
	pid := inspect(t, id).InitPid

	// Small processes fill the limit: each is smaller than the init, so at
	// equal scores the kernel kills the init (the largest process), which
	// ends the sandbox. Each round the kernel must take commands. (Hundreds
	// of processes could still take the init: their kernel memory, which
	// only the init frees by reaping them, can fill the limit alone.)
	const hog = `i=0; while [ $i -lt 25 ]; do (x=$(head -c 1500000 /dev/zero | tr '\0' a); sleep 3; echo >>/tmp/lived) & i=$((i+1)); done; wait; true`
	for round := range 3 {
		out, stderr, code := boxctlRun("exec", id, "--", "sh", "-c", hog)
		if code != 0 {
			t.Logf("round %d: hog exit %d (%q %q)", round, code, out, stderr)
		}
		if got := strings.TrimSpace(sh(t, id, "echo alive")); got != "alive" {
			t.Fatalf("round %d: sandbox answered %q after the hog", round, got)
		}
		if now := inspect(t, id).InitPid; now != pid {
			t.Fatalf("round %d: init pid %d, was %d: the OOM killer took the init", round, now, pid)
		}
	}
	// The limit was really reached: the kernel killed some of the hogs.
	if n := strings.TrimSpace(sh(t, id, `wc -l </tmp/lived`)); n == "75" {
		t.Errorf("all 75 hogs lived: the limit was never reached")
	}
}
