//go:build linux

package e2e

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// shimOf is the pid of the shim serving sandbox id: its init's parent.
func (d *daemon) shimOf(t *testing.T, id string) int {
	t.Helper()
	ctr, err := env.ctr.LoadContainer(d.c, id)
	if err != nil {
		t.Fatalf("load %s: %v", id, err)
	}
	task, err := ctr.Task(d.c, nil)
	if err != nil {
		t.Fatalf("task of %s: %v", id, err)
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", task.Pid()))
	if err != nil {
		t.Fatalf("init of %s: %v", id, err)
	}
	// The fields after the command's closing parenthesis: state, ppid.
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	ppid, _ := strconv.Atoi(f[1])
	if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", ppid)); !strings.HasPrefix(string(comm), "containerd-shim") {
		t.Fatalf("parent %d of %s's init is %q, not a shim", ppid, id, comm)
	}
	return ppid
}

func (d *daemon) mustCreate(t *testing.T) string {
	t.Helper()
	resp, err := d.api.CreateSandbox(d.c, connect.NewRequest(&boxdv1.CreateSandboxRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	return resp.Msg.Sandbox.Id
}

func (d *daemon) mustEcho(t *testing.T, id string) {
	t.Helper()
	resp, err := d.api.Exec(d.c, connect.NewRequest(&boxdv1.ExecRequest{SandboxId: id, Args: []string{"echo", id}}))
	if err != nil || string(resp.Msg.Stdout) != id+"\n" {
		t.Fatalf("exec in %s: %v %q", id, err, resp.Msg.GetStdout())
	}
}

func (d *daemon) mustDelete(t *testing.T, id string) {
	t.Helper()
	if _, err := d.api.DeleteSandbox(d.c, connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: id})); err != nil {
		t.Fatalf("delete %s: %v", id, err)
	}
}

func processGone(pid int, within time.Duration) bool {
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if syscall.Kill(pid, 0) != nil {
			return true
		}
	}
	return false
}

// Sandboxes share runc shims up to --shim-group-size; a sandbox outlives
// its group-mates' deletes, the shim exits with the group's last one,
// creates and deletes racing on the same groups all succeed, a lone
// member's stop and start go through a shim that is exiting, and the
// groups are read back after a boxd SIGKILL.
func TestShimGroups(t *testing.T) {
	d := startBoxd(t, "shimgroups", true, "--shim-group-size", "2")
	a, b, c := d.mustCreate(t), d.mustCreate(t), d.mustCreate(t)
	sa, sb, sc := d.shimOf(t, a), d.shimOf(t, b), d.shimOf(t, c)
	if sa != sb || sc == sa {
		t.Fatalf("shims %d %d %d; want the first two shared and the third its own (group size 2)", sa, sb, sc)
	}
	for _, id := range []string{a, b, c} {
		d.mustEcho(t, id)
	}
	d.mustDelete(t, a)
	d.mustEcho(t, b)
	if d.shimOf(t, b) != sa {
		t.Fatalf("b's shim changed after a's delete")
	}
	d.mustDelete(t, b)
	if !processGone(sa, 10*time.Second) {
		t.Errorf("shim %d still runs after its group's last sandbox was deleted", sa)
	}

	// c is alone in its group: stop deletes its task (its shim exits),
	// start makes one in the same group again at once.
	for range 3 {
		if _, stderr, code := d.boxctl("stop", "--time", "0", c); code != 0 {
			t.Fatalf("stop: %s", stderr)
		}
		if _, stderr, code := d.boxctl("start", c); code != 0 {
			t.Fatalf("start right after stop (the shim exiting): %s", stderr)
		}
		d.mustEcho(t, c)
	}

	// Creates and deletes at once, on groups of two that fill and empty.
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 5 {
				resp, err := d.api.CreateSandbox(d.c, connect.NewRequest(&boxdv1.CreateSandboxRequest{}))
				if err != nil {
					errs <- fmt.Errorf("worker %d create %d: %w", w, i, err)
					return
				}
				id := resp.Msg.Sandbox.Id
				if r, err := d.api.Exec(d.c, connect.NewRequest(&boxdv1.ExecRequest{SandboxId: id, Args: []string{"true"}})); err != nil || r.Msg.Result.ExitCode != 0 {
					errs <- fmt.Errorf("worker %d exec %d: %v", w, i, err)
				}
				if _, err := d.api.DeleteSandbox(d.c, connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: id})); err != nil {
					errs <- fmt.Errorf("worker %d delete %d: %w", w, i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	// After a SIGKILL, boxd knows c's group has room: the next create
	// joins it.
	d.kill()
	d.start(t)
	e := d.mustCreate(t)
	if se, sc := d.shimOf(t, e), d.shimOf(t, c); se != sc {
		t.Errorf("after a restart a create got shim %d, not c's %d (its group has room)", se, sc)
	}
	d.mustEcho(t, e)
	d.mustEcho(t, c)
}
