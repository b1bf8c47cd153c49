//go:build linux

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/sys/unix"

	"github.com/boxd-dev/boxd/internal/rpcclient"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
)

func procAPI() boxdv1connect.ProcessServiceClient { return rpcclient.NewProcess(env.socket) }

// procCall is one Exec or Attach stream driven by a test.
type procCall struct {
	t      *testing.T
	stream *connect.BidiStreamForClient[boxdv1.ProcessInput, boxdv1.ProcessOutput]
	stdout bytes.Buffer
	stderr bytes.Buffer
}

func startExec(t *testing.T, ctx context.Context, spec *boxdv1.ProcessSpec) *procCall {
	t.Helper()
	pc := &procCall{t: t, stream: procAPI().Exec(ctx)}
	pc.send(&boxdv1.ProcessInput{Event: &boxdv1.ProcessInput_Start{Start: spec}})
	return pc
}

func (pc *procCall) send(msg *boxdv1.ProcessInput) {
	pc.t.Helper()
	if err := pc.stream.Send(msg); err != nil {
		pc.t.Fatalf("send: %v", err)
	}
}

func (pc *procCall) stdin(s string) {
	pc.t.Helper()
	pc.send(&boxdv1.ProcessInput{Event: &boxdv1.ProcessInput_Stdin{Stdin: []byte(s)}})
}

// until reads output until stdout contains want; it fails on a result.
func (pc *procCall) until(want string) {
	pc.t.Helper()
	for !strings.Contains(pc.stdout.String(), want) {
		if res := pc.next(); res != nil {
			pc.t.Fatalf("exited (%+v) before printing %q; stdout %q stderr %q", res, want, pc.stdout.String(), pc.stderr.String())
		}
	}
}

// next reads one message, collecting output; it returns the result if
// that was it.
func (pc *procCall) next() *boxdv1.ExecResult {
	pc.t.Helper()
	msg, err := pc.stream.Receive()
	if err != nil {
		pc.t.Fatalf("receive: %v (stdout %q)", err, pc.stdout.String())
	}
	switch ev := msg.Event.(type) {
	case *boxdv1.ProcessOutput_Stdout:
		pc.stdout.Write(ev.Stdout)
	case *boxdv1.ProcessOutput_Stderr:
		pc.stderr.Write(ev.Stderr)
	case *boxdv1.ProcessOutput_Result:
		return ev.Result
	}
	return nil
}

func (pc *procCall) result() *boxdv1.ExecResult {
	pc.t.Helper()
	for {
		if res := pc.next(); res != nil {
			return res
		}
	}
}

// running reports whether a process whose command line contains pattern
// runs in the sandbox.
func running(t *testing.T, id, pattern string) bool {
	t.Helper()
	out := sh(t, id, "ps -o args | grep -F -- '"+pattern+"' | grep -v grep || true")
	return strings.TrimSpace(out) != ""
}

func waitNotRunning(t *testing.T, id, pattern string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for running(t, id, pattern) {
		if time.Now().After(deadline) {
			t.Fatalf("%q still runs", pattern)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestProcessExecStdin(t *testing.T) {
	id := newSandbox(t)
	// Output comes back while stdin is still open, and closing stdin is
	// EOF for the command.
	pc := startExec(t, ctx(t), &boxdv1.ProcessSpec{SandboxId: id, Args: []string{"sh", "-c", "cat; echo saw-eof"}})
	pc.stdin("hello ")
	pc.until("hello ")
	pc.stdin("world\n")
	pc.until("world")
	pc.send(&boxdv1.ProcessInput{Event: &boxdv1.ProcessInput_CloseStdin{CloseStdin: true}})
	if res := pc.result(); res.ExitCode != 0 || pc.stdout.String() != "hello world\nsaw-eof\n" {
		t.Fatalf("cat: %q %+v", pc.stdout.String(), res)
	}

	// Half-closing the request stream closes stdin too.
	big := bytes.Repeat([]byte("0123456789abcdef"), 20000)
	pc = startExec(t, ctx(t), &boxdv1.ProcessSpec{SandboxId: id, Args: []string{"wc", "-c"}})
	for off := 0; off < len(big); off += 50000 {
		pc.send(&boxdv1.ProcessInput{Event: &boxdv1.ProcessInput_Stdin{Stdin: big[off:min(off+50000, len(big))]}})
	}
	if err := pc.stream.CloseRequest(); err != nil {
		t.Fatal(err)
	}
	if res := pc.result(); res.ExitCode != 0 || strings.TrimSpace(pc.stdout.String()) != strconv.Itoa(len(big)) {
		t.Fatalf("wc -c: %q %+v", pc.stdout.String(), res)
	}

	// Stdin in the start message too big to go inline, then more stdin
	// and its close: the command reads all of it, in order.
	head := bytes.Repeat([]byte("h"), 200<<10)
	pc = startExec(t, ctx(t), &boxdv1.ProcessSpec{SandboxId: id, Args: []string{"sh", "-c", "head -c 204800 | tr -d h | wc -c; wc -c"}, Stdin: head})
	pc.send(&boxdv1.ProcessInput{Event: &boxdv1.ProcessInput_Stdin{Stdin: big}})
	pc.send(&boxdv1.ProcessInput{Event: &boxdv1.ProcessInput_CloseStdin{CloseStdin: true}})
	if res, want := pc.result(), fmt.Sprintf("0\n%d\n", len(big)); res.ExitCode != 0 || pc.stdout.String() != want {
		t.Fatalf("stdin after a big first message: %q %+v, want %q (the head first, then the rest, all of it)", pc.stdout.String(), res, want)
	}
	// The same head closed at once: the close waits for the head.
	for range 5 {
		pc = startExec(t, ctx(t), &boxdv1.ProcessSpec{SandboxId: id, Args: []string{"wc", "-c"}, Stdin: head})
		if err := pc.stream.CloseRequest(); err != nil {
			t.Fatal(err)
		}
		if res := pc.result(); res.ExitCode != 0 || strings.TrimSpace(pc.stdout.String()) != strconv.Itoa(len(head)) {
			t.Fatalf("a big first message, then the close: %q %+v, want %d bytes", pc.stdout.String(), res, len(head))
		}
	}

	// boxctl exec -i streams its stdin; EOF closes the command's.
	cmd := exec.Command(env.boxctl, "--socket", env.socket, "exec", "-i", id, "--", "sh", "-c", "wc -c; echo done")
	cmd.Stdin = bytes.NewReader(big)
	out, err := cmd.Output()
	if err != nil || string(out) != fmt.Sprintf("%d\ndone\n", len(big)) {
		t.Fatalf("boxctl exec -i: %q %v", out, err)
	}
	// Without -i the command gets no input.
	cmd = exec.Command(env.boxctl, "--socket", env.socket, "exec", id, "--", "wc", "-c")
	cmd.Stdin = bytes.NewReader(big)
	if out, err := cmd.Output(); err != nil || strings.TrimSpace(string(out)) != "0" {
		t.Fatalf("boxctl exec without -i: %q %v", out, err)
	}
}

func TestProcessSignalsAndDisconnect(t *testing.T) {
	id := newSandbox(t)
	pc := startExec(t, ctx(t), &boxdv1.ProcessSpec{SandboxId: id, Args: []string{"sh", "-c", "echo ready; sleep 1001"}})
	pc.until("ready")
	pc.send(&boxdv1.ProcessInput{Event: &boxdv1.ProcessInput_Signal{Signal: "TERM"}})
	if res := pc.result(); res.ExitCode != 143 || res.Signal != "SIGTERM" {
		t.Fatalf("after SIGTERM: %+v", res)
	}
	waitNotRunning(t, id, "sleep 1001")

	// A foreground command dies with its client: boxctl killed ...
	cmd := exec.Command(env.boxctl, "--socket", env.socket, "exec", "-i", id, "--", "sh", "-c", "echo ready; sleep 1002")
	stdin, _ := cmd.StdinPipe()
	defer stdin.Close()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(stdout).ReadString('\n'); line != "ready\n" {
		t.Fatalf("boxctl exec -i: %q %v", line, err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	waitNotRunning(t, id, "sleep 1002")
	// ... or an API stream closed before the result. (With Go's HTTP/2
	// client, cancelling the context alone does not reset a stream whose
	// request side is still open: CloseResponse does.)
	pc = startExec(t, ctx(t), &boxdv1.ProcessSpec{SandboxId: id, Args: []string{"sh", "-c", "echo ready; sleep 1009"}})
	pc.until("ready")
	pc.stream.CloseResponse()
	waitNotRunning(t, id, "sleep 1009")

	// A background one lives on.
	cctx, cancel := context.WithCancel(context.Background())
	resp, err := procAPI().Start(cctx, connect.NewRequest(&boxdv1.StartProcessRequest{Spec: &boxdv1.ProcessSpec{SandboxId: id, Args: []string{"sleep", "1003"}}}))
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	time.Sleep(500 * time.Millisecond)
	if !running(t, id, "sleep 1003") {
		t.Fatal("background process died with its client")
	}
	if _, _, code := boxctlRun("kill", id, resp.Msg.Process.Id); code != 0 {
		t.Fatalf("kill exit %d", code)
	}
	waitNotRunning(t, id, "sleep 1003")
}

func TestProcessBackground(t *testing.T) {
	id := newSandbox(t)
	out, err := boxctl(nil, "exec", "-d", id, "--", "sh", "-c", "echo out; echo err >&2; exit 3")
	if err != nil {
		t.Fatal(err)
	}
	p1 := strings.TrimSpace(out)
	if p1 != "p1" {
		t.Fatalf("exec -d printed %q", out)
	}
	if out, err := boxctl(nil, "wait", id, p1); err != nil || out != "3\n" {
		t.Fatalf("wait: %q %v", out, err)
	}
	stdout, stderr, code := boxctlRun("attach", id, p1)
	if stdout != "out\n" || stderr != "err\n" || code != 3 {
		t.Fatalf("attach to an exited process: %q %q %d", stdout, stderr, code)
	}

	out, err = boxctl(nil, "exec", "-d", id, "--", "sh", "-c", "echo started; sleep 1004")
	if err != nil {
		t.Fatal(err)
	}
	p2 := strings.TrimSpace(out)
	ps, err := boxctl(nil, "ps", id)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(ps), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "p1 ") || !strings.Contains(lines[1], "exited") ||
		!strings.HasPrefix(lines[2], p2+" ") || !strings.Contains(lines[2], "running") || !strings.Contains(lines[2], "sleep 1004") {
		t.Fatalf("ps:\n%s", ps)
	}
	if _, err := boxctl(nil, "kill", "-s", "TERM", id, p2); err != nil {
		t.Fatal(err)
	}
	if out, err := boxctl(nil, "wait", id, p2); err != nil || out != "143\n" {
		t.Fatalf("wait after TERM: %q %v", out, err)
	}
	stdout, _, code = boxctlRun("attach", id, p2)
	if stdout != "started\n" || code != 143 {
		t.Fatalf("attach after TERM: %q %d", stdout, code)
	}

	// The default signal, SIGKILL, takes the whole tree.
	out, err = boxctl(nil, "exec", "-d", id, "--", "sh", "-c", "sleep 1005 & sleep 1006")
	if err != nil {
		t.Fatal(err)
	}
	p3 := strings.TrimSpace(out)
	time.Sleep(200 * time.Millisecond)
	if _, err := boxctl(nil, "kill", id, p3); err != nil {
		t.Fatal(err)
	}
	waitNotRunning(t, id, "sleep 100")

	// Errors map to API codes.
	api := procAPI()
	_, err = api.Signal(ctx(t), connect.NewRequest(&boxdv1.SignalProcessRequest{SandboxId: id, ProcessId: p1, Signal: "TERM"}))
	if connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Errorf("signal to an exited process: %v", err)
	}
	_, err = api.Wait(ctx(t), connect.NewRequest(&boxdv1.WaitProcessRequest{SandboxId: id, ProcessId: "p999"}))
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("wait for an unknown process: %v", err)
	}
	_, err = api.Signal(ctx(t), connect.NewRequest(&boxdv1.SignalProcessRequest{SandboxId: id, ProcessId: p1, Signal: "SIGNOPE"}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Errorf("bad signal: %v", err)
	}
	list, err := api.List(ctx(t), connect.NewRequest(&boxdv1.ListProcessesRequest{SandboxId: id}))
	if err != nil || len(list.Msg.Processes) != 3 || list.Msg.Processes[0].Result.ExitCode != 3 {
		t.Fatalf("list: %v %v", list, err)
	}
}

// TestProcessReattachAfterRestart: the init, not boxd, holds a background
// process's output, so a boxd killed with SIGKILL and started again can
// replay it and follow the process to its end.
func TestProcessReattachAfterRestart(t *testing.T) {
	id := newSandbox(t)
	out, err := boxctl(nil, "exec", "-d", id, "--", "sh", "-c",
		"echo before; echo warn >&2; while [ ! -e /tmp/go ]; do sleep 0.05; done; echo after; exit 4")
	if err != nil {
		t.Fatal(err)
	}
	proc := strings.TrimSpace(out)
	deadline := time.Now().Add(10 * time.Second)
	for {
		stdout, _, code := boxctlRun("attach", "--no-follow", id, proc)
		if code != 0 {
			t.Fatalf("attach --no-follow: exit %d", code)
		}
		if stdout == "before\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no output yet: %q", stdout)
		}
		time.Sleep(50 * time.Millisecond)
	}

	killDaemon()
	if err := startDaemon(); err != nil {
		t.Fatal(err)
	}

	ps, err := boxctl(nil, "ps", id)
	if err != nil || !strings.Contains(ps, proc+" ") || !strings.Contains(ps, "running") {
		t.Fatalf("ps after restart: %q %v", ps, err)
	}
	attach := exec.Command(env.boxctl, "--socket", env.socket, "attach", id, proc)
	var stdout, stderr bytes.Buffer
	attach.Stdout, attach.Stderr = &stdout, &stderr
	if err := attach.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	sh(t, id, "touch /tmp/go")
	err = attach.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 4 || stdout.String() != "before\nafter\n" || stderr.String() != "warn\n" {
		t.Fatalf("attach after restart: %v, stdout %q, stderr %q", err, stdout.String(), stderr.String())
	}
}

func TestProcessPTY(t *testing.T) {
	checkPTY(t, newSandbox(t))
}

// checkPTY runs a command on a terminal in sandbox id: it sees its tty,
// the window size asked for, TERM, and a resize; nothing comes on stderr.
func checkPTY(t *testing.T, id string) {
	t.Helper()
	pc := startExec(t, ctx(t), &boxdv1.ProcessSpec{
		SandboxId: id, Tty: true, Window: &boxdv1.WindowSize{Rows: 33, Cols: 101},
		Args: []string{"sh", "-c", "tty; stty size; echo term=$TERM; read x; stty size; exit 7"},
	})
	pc.until("term=xterm")
	if out := pc.stdout.String(); !strings.Contains(out, "/dev/pts/") || !strings.Contains(out, "33 101") {
		t.Fatalf("tty output %q", out)
	}
	pc.send(&boxdv1.ProcessInput{Event: &boxdv1.ProcessInput_Resize{Resize: &boxdv1.WindowSize{Rows: 40, Cols: 120}}})
	pc.stdin("go\r")
	if res := pc.result(); res.ExitCode != 7 || !strings.Contains(pc.stdout.String(), "40 120") || pc.stderr.Len() != 0 {
		t.Fatalf("after resize: %q %q %+v", pc.stdout.String(), pc.stderr.String(), res)
	}
}

// TestExecInteractiveTerminal drives `boxctl exec -it` the way a person
// does, from a real terminal: raw mode, window size and its changes, ^C,
// and the exit code.
func TestExecInteractiveTerminal(t *testing.T) {
	id := newSandbox(t)
	term := newPty(t, 25, 90)
	cmd := exec.Command(env.boxctl, "--socket", env.socket, "exec", "-it", id, "--", "sh")
	cmd.Env = append(os.Environ(), "TERM=vt100")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = term.slave, term.slave, term.slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	term.slave.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })

	term.write("stty size; tty; echo T=$TERM\r")
	term.expect(t, "25 90")
	term.expect(t, "/dev/pts/")
	term.expect(t, "T=vt100")
	term.resize(t, 30, 100)
	time.Sleep(200 * time.Millisecond) // SIGWINCH reaches boxctl, then boxd
	term.write("stty size\r")
	term.expect(t, "30 100")
	// ^C is a byte in raw mode; the sandbox's terminal makes it SIGINT.
	term.write("sleep 1007\r")
	time.Sleep(300 * time.Millisecond)
	term.write("\x03")
	term.write("echo rc=$?\r")
	term.expect(t, "rc=130")
	term.write("exit 7\r")
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 7 {
			t.Fatalf("boxctl exec -it: %v; terminal output %q", err, term.output())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("boxctl did not exit; terminal output %q", term.output())
	}
	// The local terminal is back in cooked mode.
	if st, err := unix.IoctlGetTermios(int(term.master.Fd()), unix.TCGETS); err != nil || st.Lflag&unix.ICANON == 0 {
		t.Errorf("terminal left raw: %+v %v", st, err)
	}
}

// testPty is a pseudo-terminal for driving boxctl like a user would.
type testPty struct {
	master, slave *os.File
	mu            sync.Mutex
	buf           bytes.Buffer
}

func newPty(t *testing.T, rows, cols uint16) *testPty {
	t.Helper()
	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(m, unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := unix.Open("/dev/pts/"+strconv.Itoa(n), unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	p := &testPty{master: os.NewFile(uintptr(m), "ptmx"), slave: os.NewFile(uintptr(s), "pts")}
	p.resize(t, rows, cols)
	t.Cleanup(func() { p.master.Close() })
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := p.master.Read(buf)
			p.mu.Lock()
			p.buf.Write(buf[:n])
			p.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return p
}

func (p *testPty) resize(t *testing.T, rows, cols uint16) {
	if err := unix.IoctlSetWinsize(int(p.master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols}); err != nil {
		t.Fatal(err)
	}
}

func (p *testPty) write(s string) { p.master.Write([]byte(s)) }

func (p *testPty) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.buf.String()
}

// expect waits for want in the output and consumes the output up to it.
func (p *testPty) expect(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		p.mu.Lock()
		if i := strings.Index(p.buf.String(), want); i >= 0 {
			p.buf.Next(i + len(want))
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("terminal never showed %q; it shows %q", want, p.output())
}

func TestExecUser(t *testing.T) {
	id := newSandbox(t)
	for _, tc := range []struct {
		user, want string
	}{
		{"sandbox", "1000 1000 /home/sandbox"},
		{"nobody", "65534 65534 /nonexistent"},
		{"1000", "1000 1000 /home/sandbox"},
		{"1234:2345", "1234 2345 /"},
		{"sandbox:root", "1000 0 /home/sandbox"},
	} {
		out, stderr, code := boxctlRun("exec", "-u", tc.user, "-w", "/", id, "--", "sh", "-c", "echo $(id -u) $(id -g) $HOME")
		if code != 0 || strings.TrimSpace(out) != tc.want {
			t.Errorf("user %s: %q %q exit %d, want %q", tc.user, out, stderr, code, tc.want)
		}
	}
	// The privileges really drop.
	if _, _, code := boxctlRun("exec", "-u", "sandbox", id, "--", "touch", "/root/x"); code == 0 {
		t.Error("user sandbox wrote to /root")
	}
	if out, _, code := boxctlRun("exec", "-u", "sandbox", id, "--", "sh", "-c", "touch /workspace/mine && stat -c %u /workspace/mine"); code != 0 || out != "1000\n" {
		t.Errorf("file made by sandbox: %q exit %d", out, code)
	}
	_, stderr, code := boxctlRun("exec", "-u", "nosuchuser", id, "--", "id")
	if code != 125 || !strings.Contains(stderr, "invalid_argument") || !strings.Contains(stderr, "nosuchuser") {
		t.Errorf("unknown user: exit %d stderr %q", code, stderr)
	}
	// Background processes and sessions take a user too.
	out, err := boxctl(nil, "exec", "-d", "-u", "sandbox", id, "--", "id", "-u")
	if err != nil {
		t.Fatal(err)
	}
	if stdout, _, code := boxctlRun("attach", id, strings.TrimSpace(out)); stdout != "1000\n" || code != 0 {
		t.Errorf("background as sandbox: %q %d", stdout, code)
	}
}

func TestSessions(t *testing.T) {
	id := newSandbox(t)
	if _, err := boxctl(nil, "session", "create", id, "work"); err != nil {
		t.Fatal(err)
	}
	if _, err := boxctl(nil, "session", "create", "-u", "sandbox", "-e", "GREETING=hi", id, "other"); err != nil {
		t.Fatal(err)
	}
	// run runs the last argument in a session; the others are flags.
	run := func(name string, args ...string) (string, string, int) {
		a := append([]string{"session", "exec"}, args[:len(args)-1]...)
		return boxctlRun(append(a, id, name, "--", args[len(args)-1])...)
	}
	steps := []struct {
		cmd, out, err string
		code          int
	}{
		{"cd /tmp && export A=1 && B=2 && f() { echo fn$1 $A$B; }", "", "", 0},
		{"pwd; echo $A; f 2", "/tmp\n1\nfn2 12\n", "", 0},
		{"echo o; echo e >&2; false", "o\n", "e\n", 1},
		{"sh -c 'exit 9'", "", "", 9},
		{"cat; echo stdin-is-empty", "stdin-is-empty\n", "", 0},
	}
	for _, st := range steps {
		out, stderr, code := run("work", st.cmd)
		if out != st.out || stderr != st.err || code != st.code {
			t.Errorf("%q: stdout %q stderr %q exit %d; want %q %q %d", st.cmd, out, stderr, code, st.out, st.err, st.code)
		}
	}
	// The other session has its own state and user.
	if out, _, code := run("other", "echo $(id -u) $GREETING x${A}x; pwd"); out != "1000 hi xx\n/workspace\n" || code != 0 {
		t.Errorf("second session: %q %d", out, code)
	}

	// A timeout kills the command's processes; the shell and its state
	// stay.
	start := time.Now()
	out, _, code := run("work", "--timeout", "500ms", "echo started; sleep 1008; echo never")
	if code != 124 || out != "started\n" || time.Since(start) > 5*time.Second {
		t.Errorf("timeout: %q exit %d after %v", out, code, time.Since(start))
	}
	waitNotRunning(t, id, "sleep 1008")
	if out, _, _ := run("work", "pwd; f 3"); out != "/tmp\nfn3 12\n" {
		t.Errorf("state after timeout: %q", out)
	}
	// A loop in the shell itself is only stopped by replacing the shell.
	_, stderr, code := run("work", "--timeout", "300ms", "while :; do :; done")
	if code != 124 || !strings.Contains(stderr, "replaced") {
		t.Errorf("builtin loop: exit %d stderr %q", code, stderr)
	}
	if out, _, code := run("work", "echo x${A}x; pwd"); out != "xx\n/workspace\n" || code != 0 {
		t.Errorf("after the shell was replaced: %q %d", out, code)
	}

	ls, err := boxctl(nil, "session", "ls", id)
	if err != nil || !strings.Contains(ls, "work ") || !strings.Contains(ls, "other ") || !strings.Contains(ls, "sandbox") {
		t.Fatalf("session ls: %q %v", ls, err)
	}
	// Over the API: errors have codes, and the result says what happened.
	api := procAPI()
	_, err = api.CreateSession(ctx(t), connect.NewRequest(&boxdv1.CreateSessionRequest{SandboxId: id, Name: "work"}))
	if connect.CodeOf(err) != connect.CodeAlreadyExists {
		t.Errorf("duplicate session: %v", err)
	}
	stream, err := api.SessionExec(ctx(t), connect.NewRequest(&boxdv1.SessionExecRequest{SandboxId: id, Name: "other", Command: "exit 6"}))
	if err != nil {
		t.Fatal(err)
	}
	var res *boxdv1.SessionExecResult
	for stream.Receive() {
		if r := stream.Msg().GetResult(); r != nil {
			res = r
		}
	}
	if stream.Err() != nil || res == nil || res.Result.ExitCode != 6 || !res.SessionEnded {
		t.Fatalf("exit in a session: %+v %v", res, stream.Err())
	}
	if _, _, code := run("other", "true"); code != 125 {
		t.Errorf("exec in an ended session: exit %d", code)
	}
	if _, err := boxctl(nil, "session", "rm", id, "work"); err != nil {
		t.Fatal(err)
	}
	if ls, err := boxctl(nil, "session", "ls", id); err != nil || strings.Count(ls, "\n") != 1 {
		t.Errorf("session ls after rm: %q %v", ls, err)
	}
}
