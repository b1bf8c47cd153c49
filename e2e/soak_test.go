//go:build linux

package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// TestThousandExecs: 1,000 sequential execs through the API, none failing,
// and afterwards no process or zombie left in the sandbox and no descriptor
// leaked by the init.
func TestThousandExecs(t *testing.T) {
	id := newSandbox(t)
	initPid := inspect(t, id).InitPid
	count := func() (procs string, fds int) {
		// The init is non-dumpable, so its descriptors are read from the host.
		ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", initPid))
		if err != nil || len(ents) == 0 {
			t.Fatalf("init fds: %v", err)
		}
		return strings.TrimSpace(sh(t, id, "ls -d /proc/[0-9]* | wc -l")), len(ents)
	}
	// One exec first: boxd keeps its connection to the init for the next
	// (host.Pool), so the init holds it in both counts; back-to-back execs
	// reuse that one connection, never more.
	sh(t, id, "true")
	procsBefore, fdsBefore := count()
	for i := 0; i < 1000; i++ {
		resp, err := env.api.Exec(ctx(t), connect.NewRequest(&boxdv1.ExecRequest{SandboxId: id, Args: []string{"true"}}))
		if err != nil {
			t.Fatalf("exec %d: %v", i, err)
		}
		if resp.Msg.Result.ExitCode != 0 {
			t.Fatalf("exec %d: exit %d", i, resp.Msg.Result.ExitCode)
		}
	}
	// Give the init a moment (longer on a loaded machine, where the
	// sandbox's CPU quota can hold the init back: a leak stays whatever
	// the wait).
	procsAfter, fdsAfter := count()
	for deadline := time.Now().Add(10 * time.Second); (procsAfter != procsBefore || fdsAfter != fdsBefore) && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		procsAfter, fdsAfter = count()
	}
	if procsAfter != procsBefore || fdsAfter != fdsBefore {
		t.Errorf("after 1,000 execs: %s processes (before %s), init fds %d (before %d)", procsAfter, procsBefore, fdsAfter, fdsBefore)
	}
	if z := sh(t, id, "grep -l '^State:.*Z' /proc/[0-9]*/status 2>/dev/null | wc -l"); strings.TrimSpace(z) != "0" {
		t.Errorf("%s zombies after 1,000 execs", strings.TrimSpace(z))
	}
}
