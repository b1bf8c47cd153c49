package e2e

import (
	"strings"
	"sync"
	"testing"
	"time"
)

// raceScript sets a process loose in the first moments of the command: a
// subshell starts a setsid'd sleep and exits, so the sleep is an orphan
// of the init leading a session of its own before boxd can place the
// command.
const raceScript = "(setsid sleep 309 > /dev/null 2>&1 < /dev/null &); sleep 100"

// raceExecs runs the race script under a short timeout rounds times, one
// exec at a time and, every other round, two at once.
func raceExecs(t *testing.T, id string, rounds int) {
	t.Helper()
	for i := range rounds {
		n := 1 + i%2
		var wg sync.WaitGroup
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, stderr, code := boxctlRun("exec", "--timeout", "300ms", id, "--", "sh", "-c", raceScript)
				if code != 124 {
					t.Errorf("round %d: exit %d, want 124 (timeout); stderr %q", i, code, stderr)
				}
			}()
		}
		wg.Wait()
	}
}

// TestExecTimeoutEscapeRace: a command that setsid's a double-forked
// child right at its start, before boxd could place it, still loses it
// at its timeout, also with another such command started at once.
func TestExecTimeoutEscapeRace(t *testing.T) {
	id := newSandbox(t)
	raceExecs(t, id, 30)
	if left := survivors(t, id, "sleep 309"); len(left) > 0 {
		t.Errorf("%d processes outlived their command's timeout: %q", len(left), left)
	}
}

// TestExecTimeoutEscapeRaceGvisor: the same under gVisor, where the init
// kills the orphans a timed-out command's tree left with it.
func TestExecTimeoutEscapeRaceGvisor(t *testing.T) {
	id := newSandbox(t, "--runtime", "gvisor")
	raceExecs(t, id, 30)
	out := sh(t, id, "ps -o args | grep '^sleep 309' || true")
	if n := strings.Count(out, "sleep 309"); n > 0 {
		t.Errorf("%d processes outlived their command's timeout:\n%s", n, out)
	}
}

// TestProcessKillKillsEscapees: killing a background process takes what
// it set loose, whatever it did to leave its session.
func TestProcessKillKillsEscapees(t *testing.T) {
	id := newSandbox(t)
	out, err := boxctl(nil, "exec", "-d", id, "--", "sh", "-c",
		"(setsid sleep 310 > /dev/null 2>&1 < /dev/null &); sleep 0.2; setsid sh -c '(sleep 311 &)' > /dev/null 2>&1 < /dev/null; sleep 100")
	if err != nil {
		t.Fatal(err)
	}
	proc := strings.TrimSpace(out)
	time.Sleep(time.Second)
	if len(survivors(t, id, "sleep 31")) == 0 {
		t.Fatal("the background process's children did not start")
	}
	if _, err := boxctl(nil, "kill", id, proc); err != nil {
		t.Fatalf("kill %s: %v", proc, err)
	}
	if left := survivors(t, id, "sleep 31"); len(left) > 0 {
		t.Errorf("processes outlived kill %s: %q", proc, left)
	}
	if left := survivors(t, id, "sleep 100"); len(left) > 0 {
		t.Errorf("the process itself outlived kill %s: %q", proc, left)
	}
}

// TestSessionTimeoutKillsEscapees: a session command's timeout takes what
// the command set loose; an earlier command's deliberate leftover and the
// session itself stay.
func TestSessionTimeoutKillsEscapees(t *testing.T) {
	id := newSandbox(t)
	if _, err := boxctl(nil, "session", "create", id, "s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := boxctl(nil, "session", "exec", id, "s1", "--", "(setsid sleep 313 > /dev/null 2>&1 < /dev/null &); export KEPT=1"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // a later clock tick than the next command's
	_, stderr, code := boxctlRun("session", "exec", "--timeout", "1s", id, "s1", "--",
		"(setsid sleep 312 > /dev/null 2>&1 < /dev/null &); sleep 0.2; setsid sh -c '(sleep 314 &)' > /dev/null 2>&1 < /dev/null; sleep 100")
	if code != 124 {
		t.Fatalf("session exec: exit %d, want 124 (timeout); stderr %q", code, stderr)
	}
	for _, marker := range []string{"sleep 312", "sleep 314"} {
		if left := survivors(t, id, marker); len(left) > 0 {
			t.Errorf("processes outlived the session command's timeout: %q", left)
		}
	}
	if len(survivors(t, id, "sleep 313")) == 0 {
		t.Error("an earlier command's leftover died with a later command's timeout")
	}
	if out, err := boxctl(nil, "session", "exec", id, "s1", "--", "echo $KEPT"); err != nil || strings.TrimSpace(out) != "1" {
		t.Errorf("the session after the timeout: %q %v", out, err)
	}
}
