//go:build linux

package e2e

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/containerd/containerd/v2/client"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// TestDrainOnSIGTERM: on SIGTERM boxd refuses new calls with unavailable
// while a running exec finishes within the grace period, then exits; the
// sandbox keeps running in containerd.
func TestDrainOnSIGTERM(t *testing.T) {
	d := startBoxd(t, "boxd-e2e-drain", true, "--drain-timeout", "30s")
	resp, err := d.api.CreateSandbox(d.c, connect.NewRequest(&boxdv1.CreateSandboxRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	id := resp.Msg.Sandbox.Id
	type result struct {
		out  string
		code int32
		err  error
	}
	done := make(chan result, 1)
	go func() {
		r, err := d.api.Exec(d.c, connect.NewRequest(&boxdv1.ExecRequest{SandboxId: id, Args: []string{"sh", "-c", "touch /tmp/started; sleep 3; echo finished"}}))
		if err != nil {
			done <- result{err: err}
			return
		}
		done <- result{out: string(r.Msg.Stdout), code: r.Msg.Result.ExitCode}
	}()
	// Wait until the exec runs in the sandbox.
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := d.api.Exec(d.c, connect.NewRequest(&boxdv1.ExecRequest{SandboxId: id, Args: []string{"test", "-e", "/tmp/started"}}))
		if err == nil && r.Msg.Result.ExitCode == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the exec never started: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// New calls are refused with unavailable (once boxd has the signal).
	deadline = time.Now().Add(10 * time.Second)
	for {
		_, err := d.api.Exec(d.c, connect.NewRequest(&boxdv1.ExecRequest{SandboxId: id, Args: []string{"true"}}))
		if connect.CodeOf(err) == connect.CodeUnavailable {
			if !strings.Contains(err.Error(), "draining") {
				t.Errorf("refusal does not say why: %v", err)
			}
			break
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("a call after SIGTERM: %v, want unavailable (the running exec keeps boxd draining)", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case r := <-done:
		if r.err != nil || r.code != 0 || !strings.Contains(r.out, "finished") {
			t.Fatalf("the exec running at SIGTERM: %+v, want it to finish", r)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the running exec did not finish")
	}
	exited := make(chan error, 1)
	go func() { _, err := d.cmd.Process.Wait(); exited <- err }()
	select {
	case <-exited:
		d.cmd = nil
	case <-time.After(10 * time.Second):
		t.Fatal("boxd did not exit after the drain")
	}
	ctr, err := env.ctr.LoadContainer(d.c, id)
	if err != nil {
		t.Fatal(err)
	}
	task, err := ctr.Task(d.c, nil)
	if err != nil {
		t.Fatalf("sandbox task after boxd stopped: %v", err)
	}
	if st, err := task.Status(d.c); err != nil || st.Status != client.Running {
		t.Fatalf("sandbox after boxd stopped: %v %v, want running", st.Status, err)
	}
}
