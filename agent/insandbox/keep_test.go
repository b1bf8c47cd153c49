//go:build linux

package insandbox

import (
	"bytes"
	"context"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boxd-dev/boxd/agent/host"
	"github.com/boxd-dev/boxd/agent/wire"
)

// TestExecKeptConnection: execs and pings from a pooled client share one
// connection to the init (wire.Request.Keep), each with its own output and
// exit status, a timed-out command included; an exec the host abandons
// still kills its command and costs only a fresh connection, and so does
// one that cannot start.
func TestExecKeptConnection(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		var dials atomic.Int32
		pool := host.NewPool()
		t.Cleanup(pool.Close)
		c := host.NewDialClient(func(ctx context.Context) (net.Conn, error) {
			dials.Add(1)
			var d net.Dialer
			return d.DialContext(ctx, "unix", tg.socket)
		}).Pooled(pool)
		ctx := testCtx(t)
		exec := func(req wire.ExecRequest) (string, wire.ExecResult, error) {
			var out bytes.Buffer
			res, err := c.Exec(ctx, req, nil, &out, nil)
			return out.String(), res, err
		}
		for i := range 10 {
			out, res, err := exec(wire.ExecRequest{Args: []string{"sh", "-c", "echo " + strconv.Itoa(i) + "; exit " + strconv.Itoa(i%3)}})
			if err != nil || out != strconv.Itoa(i)+"\n" || res.ExitCode != i%3 {
				t.Fatalf("exec %d: out %q exit %d err %v", i, out, res.ExitCode, err)
			}
		}
		if err := c.Ping(ctx); err != nil {
			t.Fatal(err)
		}
		_, res, err := exec(wire.ExecRequest{Args: []string{"sleep", "100"}, Timeout: 100 * time.Millisecond})
		if err != nil || !res.TimedOut {
			t.Fatalf("timed-out exec: %+v %v", res, err)
		}
		if n := dials.Load(); n != 1 {
			t.Fatalf("10 execs, a ping and a timeout used %d connections, want 1", n)
		}

		// Abandoned by the host: the tree dies, the connection is not reused.
		var out syncBuffer
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := c.Exec(cctx, wire.ExecRequest{Args: []string{"sh", "-c", "echo $$; sleep 100"}}, nil, &out, nil)
			done <- err
		}()
		for deadline := time.Now().Add(5 * time.Second); !strings.HasSuffix(out.String(), "\n"); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the abandoned exec never printed its pid")
			}
		}
		cancel()
		if err := <-done; err == nil {
			t.Fatal("abandoned exec returned no error")
		}
		pid, err := strconv.Atoi(strings.TrimSpace(out.String()))
		if err != nil {
			t.Fatal(err)
		}
		waitGone(t, pid)
		if _, res, err := exec(wire.ExecRequest{Args: []string{"/no/such/command"}}); err != nil || res.ExitCode != 127 {
			t.Fatalf("a command that cannot start: exit %d, err %v; want exit 127", res.ExitCode, err)
		}
		if out, _, err := exec(wire.ExecRequest{Args: []string{"echo", "after"}}); err != nil || out != "after\n" {
			t.Fatalf("exec after an abandoned one: %q %v", out, err)
		}
		if n := dials.Load(); n != 3 {
			t.Fatalf("%d connections after an abandoned exec and a failed start, want 3", n)
		}
	})
}

// TestExecProcessOneStream: ExecProcess without controls runs on the exec
// op and keeps its connection (the exec floor); with controls it runs on
// process-exec. Either way the same command gives the same output and
// result (2>&1 included), and a stream without controls refuses a signal
// rather than send the init a frame the exec op does not carry.
func TestExecProcessOneStream(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		var dials atomic.Int32
		pool := host.NewPool()
		t.Cleanup(pool.Close)
		c := host.NewDialClient(func(ctx context.Context) (net.Conn, error) {
			dials.Add(1)
			var d net.Dialer
			return d.DialContext(ctx, "unix", tg.socket)
		}).Pooled(pool)
		ctx := testCtx(t)
		spec := wire.ProcessSpec{ExecRequest: wire.ExecRequest{Args: []string{"sh", "-c", "echo a; echo b >&2; echo c; exit 4"}, Combined: true}}
		run := func(controls bool) (string, wire.ExecResult) {
			ps, err := c.ExecProcess(ctx, spec, controls)
			if err != nil {
				t.Fatal(err)
			}
			defer ps.Close()
			var out, errs bytes.Buffer
			res, err := ps.Output(&out, &errs)
			if err != nil || errs.Len() != 0 {
				t.Fatalf("controls=%v: %v, stderr %q", controls, err, errs.String())
			}
			return out.String(), res
		}
		for range 3 {
			if out, res := run(false); out != "a\nb\nc\n" || res.ExitCode != 4 || res.Kept {
				t.Fatalf("exec op: %q %+v", out, res)
			}
		}
		if n := dials.Load(); n != 1 {
			t.Errorf("3 execs without controls used %d connections, want 1", n)
		}
		if out, res := run(true); out != "a\nb\nc\n" || res.ExitCode != 4 {
			t.Fatalf("process-exec: %q %+v", out, res)
		}
		if n := dials.Load(); n != 2 {
			t.Errorf("an exec with controls used %d more connections, want 1", n-1)
		}

		ps, err := c.ExecProcess(ctx, wire.ProcessSpec{ExecRequest: wire.ExecRequest{Args: []string{"sleep", "100"}}}, false)
		if err != nil {
			t.Fatal(err)
		}
		if err := ps.Signal("TERM"); err == nil {
			t.Error("a stream without controls sent a signal")
		}
		ps.Close()
	})
}
