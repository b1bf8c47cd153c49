//go:build linux

package insandbox

import (
	"bytes"
	"context"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"

	"github.com/boxd-dev/boxd/agent/host"
	"github.com/boxd-dev/boxd/agent/wire"
)

// collect reads a process stream to its end.
func collect(t *testing.T, ps *host.ProcessStream) (stdout, stderr string, res *wire.ExecResult) {
	t.Helper()
	var out, errb bytes.Buffer
	for {
		ev, err := ps.Next()
		if err == io.EOF {
			return out.String(), errb.String(), res
		}
		if err != nil {
			t.Fatalf("Next: %v (stdout so far %q)", err, out.String())
		}
		switch {
		case ev.Result != nil:
			res = ev.Result
		case ev.Stream == wire.FrameStdout:
			out.Write(ev.Data)
		case ev.Stream == wire.FrameStderr:
			errb.Write(ev.Data)
		}
	}
}

// readUntil reads a process stream until its stdout contains want.
func readUntil(t *testing.T, ps *host.ProcessStream, want string) string {
	t.Helper()
	var out bytes.Buffer
	for !strings.Contains(out.String(), want) {
		ev, err := ps.Next()
		if err != nil {
			t.Fatalf("waiting for %q: %v (got %q)", want, err, out.String())
		}
		if ev.Result != nil {
			t.Fatalf("waiting for %q: exited %+v (got %q)", want, ev.Result, out.String())
		}
		out.Write(ev.Data)
	}
	return out.String()
}

func execProc(t *testing.T, tg *target, spec wire.ProcessSpec) *host.ProcessStream {
	t.Helper()
	ps, err := tg.client.ExecProcess(testCtx(t), spec, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ps.Close() })
	return ps
}

func TestProcessExecStreamsStdin(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		ps := execProc(t, tg, wire.ProcessSpec{ExecRequest: wire.ExecRequest{Args: []string{"sh", "-c", "cat; echo done >&2"}, StdinStream: true}})
		// Output comes back while stdin is still open.
		ps.Write([]byte("first\n"))
		readUntil(t, ps, "first\n")
		big := bytes.Repeat([]byte("0123456789"), 30000)
		go func() {
			ps.Write(big)
			ps.CloseStdin()
		}()
		out, errs, res := collect(t, ps)
		if out != string(big) || errs != "done\n" || res == nil || res.ExitCode != 0 {
			t.Fatalf("stdout %d bytes (want %d), stderr %q, result %+v", len(out), len(big), errs, res)
		}

		ps = execProc(t, tg, wire.ProcessSpec{ExecRequest: wire.ExecRequest{Args: []string{"wc", "-c"}, Stdin: big}})
		out, _, res = collect(t, ps)
		if strings.TrimSpace(out) != strconv.Itoa(len(big)) || res.ExitCode != 0 {
			t.Fatalf("wc -c of inline stdin: %q %+v", out, res)
		}
	})
}

func TestProcessExecExitAndSignal(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		_, _, res := collect(t, execProc(t, tg, wire.ProcessSpec{ExecRequest: wire.ExecRequest{Args: []string{"sh", "-c", "exit 3"}}}))
		if res.ExitCode != 3 {
			t.Fatalf("%+v", res)
		}
		_, errs, res := collect(t, execProc(t, tg, wire.ProcessSpec{ExecRequest: wire.ExecRequest{Args: []string{"no-such-command-boxd"}}}))
		if res.ExitCode != wire.ExitNotFound || !strings.Contains(errs, "not found") {
			t.Fatalf("%q %+v", errs, res)
		}
		ps := execProc(t, tg, wire.ProcessSpec{ExecRequest: wire.ExecRequest{Args: []string{"sh", "-c", "echo ready; sleep 100"}}})
		readUntil(t, ps, "ready")
		if err := ps.Signal("TERM"); err != nil {
			t.Fatal(err)
		}
		_, _, res = collect(t, ps)
		if res.ExitCode != 143 || res.Signal != "SIGTERM" {
			t.Fatalf("after SIGTERM: %+v", res)
		}
		ps = execProc(t, tg, wire.ProcessSpec{ExecRequest: wire.ExecRequest{Args: []string{"sleep", "100"}, Timeout: 200 * time.Millisecond}})
		if _, _, res = collect(t, ps); !res.TimedOut || res.ExitCode != wire.ExitTimeout {
			t.Fatalf("timeout: %+v", res)
		}
	})
}

func TestProcessExecKilledOnDisconnect(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		ps := execProc(t, tg, wire.ProcessSpec{ExecRequest: wire.ExecRequest{Args: []string{"sh", "-c", "sleep 100 & echo $!; wait"}}})
		out := readUntil(t, ps, "\n")
		pid, err := strconv.Atoi(strings.TrimSpace(out))
		if err != nil {
			t.Fatal(out)
		}
		ps.Close()
		waitGone(t, pid)
	})
}

func TestProcessTty(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		ps := execProc(t, tg, wire.ProcessSpec{
			ExecRequest: wire.ExecRequest{Args: []string{"sh", "-c", "tty; stty size; echo $TERM; read x; stty size; exit 7"}, StdinStream: true},
			Tty:         true, Window: &wire.WindowSize{Rows: 33, Cols: 101},
		})
		out := readUntil(t, ps, "xterm")
		if !strings.Contains(out, "/dev/pts/") || !strings.Contains(out, "33 101\r\n") {
			t.Fatalf("tty output %q", out)
		}
		if err := ps.Resize(wire.WindowSize{Rows: 40, Cols: 120}); err != nil {
			t.Fatal(err)
		}
		ps.Write([]byte("go\r"))
		rest, errs, res := collect(t, ps)
		if !strings.Contains(rest, "40 120") || errs != "" || res.ExitCode != 7 {
			t.Fatalf("after resize: %q %q %+v", rest, errs, res)
		}

		// ^C through the terminal's line discipline interrupts the
		// foreground job.
		ps = execProc(t, tg, wire.ProcessSpec{
			ExecRequest: wire.ExecRequest{Args: []string{"sh", "-c", "echo ready; exec sleep 100"}, StdinStream: true},
			Tty:         true,
		})
		readUntil(t, ps, "ready")
		ps.Write([]byte{3})
		if _, _, res = collect(t, ps); res.Signal != "SIGINT" || res.ExitCode != 130 {
			t.Fatalf("after ^C: %+v", res)
		}
	})
}

func TestProcessUser(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		for _, tc := range []struct{ user, want string }{
			{"nobody", "65534 65534 /nonexistent"},
			{"65534", "65534 65534 /nonexistent"},
			{"4321:4322", "4321 4322 /"},
			{"nobody:0", "65534 0 /nonexistent"},
			{"", "0 0"}, // the base env has no HOME
		} {
			ps := execProc(t, tg, wire.ProcessSpec{ExecRequest: wire.ExecRequest{Args: []string{"sh", "-c", `echo $(id -u) $(id -g) $HOME`}, Dir: "/", User: tc.user}})
			out, errs, res := collect(t, ps)
			if strings.TrimSpace(out) != strings.TrimSpace(tc.want) || res.ExitCode != 0 {
				t.Errorf("user %q: %q %q %+v, want %q", tc.user, out, errs, res, tc.want)
			}
		}
		_, err := tg.client.ExecProcess(testCtx(t), wire.ProcessSpec{ExecRequest: wire.ExecRequest{Args: []string{"id"}, User: "no-such-user-boxd"}}, true)
		if err == nil {
			// The error may come with the first frame.
			ps := execProc(t, tg, wire.ProcessSpec{ExecRequest: wire.ExecRequest{Args: []string{"id"}, User: "no-such-user-boxd"}})
			_, err = ps.Next()
		}
		if !errdefs.IsInvalidArgument(err) {
			t.Fatalf("unknown user: %v", err)
		}
		// A terminal belongs to its user.
		ps := execProc(t, tg, wire.ProcessSpec{ExecRequest: wire.ExecRequest{Args: []string{"sh", "-c", "stat -c %u $(tty)"}, Dir: "/", User: "nobody"}, Tty: true})
		if out, _, res := collect(t, ps); strings.TrimSpace(out) != "65534" || res.ExitCode != 0 {
			t.Fatalf("pty owner %q %+v", out, res)
		}
	})
}

func TestProcessBackground(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		ctx := testCtx(t)
		c := tg.client
		info, err := c.StartProcess(ctx, wire.ProcessSpec{ExecRequest: wire.ExecRequest{Args: []string{"sh", "-c", "echo out; echo err >&2; echo out2; exit 3"}}})
		if err != nil {
			t.Fatal(err)
		}
		if info.ID != "p1" || info.PID <= 0 || info.Args[0] != "sh" || info.User != "root" {
			t.Fatalf("start: %+v (a process without a user runs as, and shows, root)", info)
		}
		done, err := c.WaitProcess(ctx, info.ID)
		if err != nil {
			t.Fatal(err)
		}
		if done.State != wire.StateExited || done.Result.ExitCode != 3 {
			t.Fatalf("wait: %+v", done)
		}
		ps, ainfo, err := c.AttachProcess(ctx, wire.AttachArgs{ID: info.ID})
		if err != nil {
			t.Fatal(err)
		}
		out, errs, res := collect(t, ps)
		if ainfo.State != wire.StateExited || out != "out\nout2\n" || errs != "err\n" || res.ExitCode != 3 {
			t.Fatalf("attach: %+v %q %q %+v", ainfo, out, errs, res)
		}
		if _, err := c.SignalProcess(ctx, info.ID, "TERM"); !errdefs.IsFailedPrecondition(err) {
			t.Fatalf("signal to an exited process: %v", err)
		}

		// A running one: listed, signalled, waited for.
		info, err = c.StartProcess(ctx, wire.ProcessSpec{ExecRequest: wire.ExecRequest{Args: []string{"sleep", "100"}}})
		if err != nil {
			t.Fatal(err)
		}
		list, err := c.ListProcesses(ctx)
		if err != nil || len(list) != 2 || list[0].ID != "p1" || list[1].ID != "p2" || list[1].State != wire.StateRunning || list[0].State != wire.StateExited {
			t.Fatalf("list: %+v %v", list, err)
		}
		if _, err := c.SignalProcess(ctx, info.ID, "SIGTERM"); err != nil {
			t.Fatal(err)
		}
		done, err = c.WaitProcess(ctx, info.ID)
		if err != nil || done.Result.Signal != "SIGTERM" || done.Result.ExitCode != 143 {
			t.Fatalf("after SIGTERM: %+v %v", done, err)
		}

		// SIGKILL takes the whole tree.
		info, err = c.StartProcess(ctx, wire.ProcessSpec{ExecRequest: wire.ExecRequest{Args: []string{"sh", "-c", "sleep 100 & echo $!; wait"}}})
		if err != nil {
			t.Fatal(err)
		}
		ps, _, err = c.AttachProcess(ctx, wire.AttachArgs{ID: info.ID})
		if err != nil {
			t.Fatal(err)
		}
		child, _ := strconv.Atoi(strings.TrimSpace(readUntil(t, ps, "\n")))
		ps.Close()
		if _, err := c.SignalProcess(ctx, info.ID, "KILL"); err != nil {
			t.Fatal(err)
		}
		waitGone(t, child)
		if _, err := c.WaitProcess(ctx, "p99"); !errdefs.IsNotFound(err) {
			t.Fatalf("unknown id: %v", err)
		}
		// A command that cannot start is a process that exited with 127.
		info, err = c.StartProcess(ctx, wire.ProcessSpec{ExecRequest: wire.ExecRequest{Args: []string{"no-such-command-boxd"}}})
		if err != nil || info.State != wire.StateExited || info.Result.ExitCode != wire.ExitNotFound {
			t.Fatalf("missing command: %+v %v", info, err)
		}
	})
}

func TestProcessBackgroundSurvivesDisconnect(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		ctx, cancel := context.WithCancel(context.Background())
		info, err := tg.client.StartProcess(ctx, wire.ProcessSpec{ExecRequest: wire.ExecRequest{Args: []string{"sh", "-c", "read x; echo got $x"}, StdinStream: true}})
		if err != nil {
			t.Fatal(err)
		}
		ps, _, err := tg.client.AttachProcess(ctx, wire.AttachArgs{ID: info.ID, Stdin: true})
		if err != nil {
			t.Fatal(err)
		}
		cancel() // drops both connections
		ps.Close()
		time.Sleep(100 * time.Millisecond)
		if processGone(info.PID) {
			t.Fatal("background process died with its client")
		}
		// Attach again, with stdin: the process reads it.
		ps, ainfo, err := tg.client.AttachProcess(testCtx(t), wire.AttachArgs{ID: info.ID, Stdin: true})
		if err != nil {
			t.Fatal(err)
		}
		if !ainfo.StdinOpen || ainfo.State != wire.StateRunning {
			t.Fatalf("attach info %+v", ainfo)
		}
		ps.Write([]byte("hello\n"))
		out, _, res := collect(t, ps)
		if out != "got hello\n" || res.ExitCode != 0 {
			t.Fatalf("%q %+v", out, res)
		}
	})
}

func TestProcessAttachFollowsAndReplays(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		ctx := testCtx(t)
		gate := tg.workdir + "/gate"
		info, err := tg.client.StartProcess(ctx, wire.ProcessSpec{ExecRequest: wire.ExecRequest{Args: []string{"sh", "-c",
			"echo one; echo two >&2; while [ ! -e " + gate + " ]; do sleep 0.02; done; echo three; echo four >&2; exit 5"}}})
		if err != nil {
			t.Fatal(err)
		}
		// Two readers, one before and one after the first output.
		a1, _, err := tg.client.AttachProcess(ctx, wire.AttachArgs{ID: info.ID})
		if err != nil {
			t.Fatal(err)
		}
		readUntil(t, a1, "one")
		time.Sleep(50 * time.Millisecond)
		// A reader that does not follow gets what is buffered, then EOF.
		nf, _, err := tg.client.AttachProcess(ctx, wire.AttachArgs{ID: info.ID, NoFollow: true})
		if err != nil {
			t.Fatal(err)
		}
		out, errs, res := collect(t, nf)
		if out != "one\n" || errs != "two\n" || res != nil {
			t.Fatalf("no-follow: %q %q %+v", out, errs, res)
		}
		a2, _, err := tg.client.AttachProcess(ctx, wire.AttachArgs{ID: info.ID})
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(gate, nil, 0o644)
		out, errs, res = collect(t, a2)
		if out != "one\nthree\n" || errs != "two\nfour\n" || res.ExitCode != 5 || res.Truncated {
			t.Fatalf("second reader: %q %q %+v", out, errs, res)
		}
		out, errs, res = collect(t, a1)
		// readUntil may or may not have consumed "two".
		if out != "three\n" || !strings.HasSuffix(errs, "four\n") || res.ExitCode != 5 {
			t.Fatalf("first reader: %q %q %+v", out, errs, res)
		}
	})
}

func TestProcessRingKeepsTheEnd(t *testing.T) {
	tg := startServer(t)
	ctx := testCtx(t)
	info, err := tg.client.StartProcess(ctx, wire.ProcessSpec{ExecRequest: wire.ExecRequest{Args: []string{"sh", "-c",
		"i=0; while [ $i -lt 3000 ]; do printf '%01023d\\n' $i; i=$((i+1)); done"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tg.client.WaitProcess(ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	ps, _, err := tg.client.AttachProcess(ctx, wire.AttachArgs{ID: info.ID})
	if err != nil {
		t.Fatal(err)
	}
	out, _, res := collect(t, ps)
	if len(out) != wire.ProcessLogBytes || !res.Truncated {
		t.Fatalf("replayed %d bytes (want %d), result %+v", len(out), wire.ProcessLogBytes, res)
	}
	if !strings.HasSuffix(out, strings.Repeat("0", 1019)+"2999\n") {
		t.Fatalf("replay does not end with the last line: %q", out[len(out)-100:])
	}
}

func TestProcessTableBound(t *testing.T) {
	tg := startServer(t)
	ctx := testCtx(t)
	var first string
	for i := range wire.MaxProcesses {
		info, err := tg.client.StartProcess(ctx, wire.ProcessSpec{ExecRequest: wire.ExecRequest{Args: []string{"sleep", "100"}}})
		if err != nil {
			t.Fatalf("start %d: %v", i, err)
		}
		if i == 0 {
			first = info.ID
		}
	}
	_, err := tg.client.StartProcess(ctx, wire.ProcessSpec{ExecRequest: wire.ExecRequest{Args: []string{"true"}}})
	if !errdefs.IsResourceExhausted(err) {
		t.Fatalf("start beyond the bound: %v", err)
	}
	if _, err := tg.client.SignalProcess(ctx, first, "KILL"); err != nil {
		t.Fatal(err)
	}
	if _, err := tg.client.WaitProcess(ctx, first); err != nil {
		t.Fatal(err)
	}
	// The exited one makes room.
	if _, err := tg.client.StartProcess(ctx, wire.ProcessSpec{ExecRequest: wire.ExecRequest{Args: []string{"true"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := tg.client.WaitProcess(ctx, first); !errdefs.IsNotFound(err) {
		t.Fatalf("evicted process: %v", err)
	}
}

func TestProcessMalformedArgs(t *testing.T) {
	tg := startServer(t)
	for name, req := range map[string]string{
		"no args":       `{"op":"process-exec"}`,
		"unknown field": `{"op":"process-start","args":{"args":["true"],"privileged":true}}`,
		"bad window":    `{"op":"process-exec","args":{"args":["true"],"tty":true,"window":{"rows":9999,"cols":1}}}`,
		"bad user":      `{"op":"process-exec","args":{"args":["true"],"user":"a b"}}`,
		"bad signal":    `{"op":"process-signal","args":{"id":"p1","signal":"SIGNOPE"}}`,
	} {
		f := rawExchange(t, tg, encodeFrame(wire.FrameRequest, []byte(req)))
		if f.Type != wire.FrameError || !strings.Contains(string(f.Payload), wire.CodeInvalidArgument) {
			// An unknown process id may be reported first.
			if !(name == "bad signal" && strings.Contains(string(f.Payload), wire.CodeNotFound)) {
				t.Errorf("%s: %s %s", name, f.Type, f.Payload)
			}
		}
	}
}

func TestOutputLogOrder(t *testing.T) {
	l := newOutputLog(10)
	l.write(0, []byte("ab"))
	l.write(1, []byte("X"))
	l.write(0, []byte("cd"))
	l.write(0, []byte("ef")) // coalesced with "cd"
	var c logCursor
	var got []string
	for {
		s, d, _, _ := l.next(&c, 3)
		if d == nil {
			break
		}
		got = append(got, strconv.Itoa(s)+string(d))
	}
	if strings.Join(got, ",") != "0ab,1X,0cde,0f" {
		t.Fatalf("order %v", got)
	}
	// Overflow keeps the newest bytes of each stream and tells a reader
	// that fell behind.
	l.write(0, []byte("0123456789"))
	l.write(0, []byte("ghij"))
	var late logCursor
	var all []string
	for {
		s, d, _, _ := l.next(&late, 100)
		if d == nil {
			break
		}
		all = append(all, strconv.Itoa(s)+string(d))
	}
	if strings.Join(all, ",") != "1X,0456789ghij" || !late.missed || !l.lostOutput() {
		t.Fatalf("after overflow: %v %v", all, late.missed)
	}
	_, d, _, _ := l.next(&c, 100)
	if string(d) != "456789ghij" || !c.missed {
		t.Fatalf("reader that fell behind: %q %v", d, c.missed)
	}
	l.close()
	if _, d, _, closed := l.next(&c, 100); d != nil || !closed {
		t.Fatal("not closed")
	}
}
