//go:build linux

package insandbox

import (
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/containerd/errdefs"

	"github.com/boxd-dev/boxd/agent/wire"
)

// Combined output keeps the order of writes across stdout and stderr, and
// every result carries the command's pid.
func TestExecCombinedAndPID(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		out, errs, res := run(t, tg, wire.ExecRequest{Combined: true, Args: []string{"sh", "-c", "echo 1; echo 2 >&2; echo 3; echo 4 >&2; echo $$"}}, nil)
		lines := strings.Split(out, "\n")
		if errs != "" || len(lines) != 6 || strings.Join(lines[:4], " ") != "1 2 3 4" {
			t.Fatalf("combined: stdout %q stderr %q", out, errs)
		}
		if pid, _ := strconv.Atoi(lines[4]); pid <= 0 || pid != res.PID {
			t.Fatalf("result pid %d, the shell said %q", res.PID, lines[4])
		}
	})
}

// set-defaults changes the env and workdir of later commands only.
func TestSetDefaults(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		nd := filepath.Join(tg.workdir, "new", "dir")
		if err := tg.client.SetDefaults(testCtx(t), wire.Defaults{Env: []string{"FOO=changed", "ADDED=1"}, Workdir: nd}); err != nil {
			t.Fatal(err)
		}
		out, _, _ := run(t, tg, wire.ExecRequest{Args: []string{"sh", "-c", `echo "$FOO $BASE $ADDED"; pwd`}}, nil)
		if want := "changed 1 1\n" + nd + "\n"; out != want {
			t.Fatalf("after set-defaults: %q, want %q", out, want)
		}
		for _, d := range []wire.Defaults{{Env: []string{"NOEQUALS"}}, {Workdir: "relative"}} {
			if err := tg.client.SetDefaults(testCtx(t), d); !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("SetDefaults(%+v) = %v, want invalid argument", d, err)
			}
		}
		// An unknown default user is refused and changes nothing, not even
		// the env sent with it.
		err := tg.client.SetDefaults(testCtx(t), wire.Defaults{Env: []string{"FOO=again"}, User: "no-such-user-here"})
		if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "default user:") {
			t.Errorf("SetDefaults(unknown user) = %v, want invalid argument naming the default user", err)
		}
		if out, _, _ := run(t, tg, wire.ExecRequest{Args: []string{"sh", "-c", `echo "$FOO"`}}, nil); out != "changed\n" {
			t.Errorf("after a refused user: FOO=%q, want changed", out)
		}
		// Outside a pid namespace terminate would reach the host: refused.
		if err := tg.client.Terminate(testCtx(t)); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("Terminate outside PID 1 = %v, want refused", err)
		}
	})
}
