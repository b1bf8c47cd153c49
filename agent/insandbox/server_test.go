//go:build linux

package insandbox

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/boxd-dev/boxd/agent/wire"
)

// rawExchange sends raw bytes as a request and returns the first frame of
// the reply.
func rawExchange(t *testing.T, tg *target, req []byte) wire.Frame {
	t.Helper()
	c, err := net.Dial("unix", tg.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(req); err != nil {
		t.Fatal(err)
	}
	f, err := wire.NewFrameReader(c).ReadFrame()
	if err != nil {
		t.Fatalf("no reply: %v", err)
	}
	return wire.Frame{Type: f.Type, Payload: bytes.Clone(f.Payload)}
}

// header is a frame header announcing n bytes of payload.
func header(t wire.FrameType, n uint32) []byte {
	b := []byte{byte(t), 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], n)
	return b
}

func encodeFrame(t wire.FrameType, p []byte) []byte {
	var b bytes.Buffer
	wire.NewFrameWriter(&b).WriteFrame(t, p)
	return b.Bytes()
}

func TestMalformedRequests(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		cases := map[string][]byte{
			"not a frame":       []byte("GET / HTTP/1.1\r\n\r\n"),
			"oversize":          header(wire.FrameRequest, wire.MaxFramePayload+1),
			"not a request":     encodeFrame(wire.FrameStdout, []byte("x")),
			"bad json":          encodeFrame(wire.FrameRequest, []byte("{")),
			"unknown op":        encodeFrame(wire.FrameRequest, []byte(`{"op":"format-disk"}`)),
			"exec without args": encodeFrame(wire.FrameRequest, []byte(`{"op":"exec"}`)),
			"wrong types":       encodeFrame(wire.FrameRequest, []byte(`{"op":"exec","exec":{"args":"sh"}}`)),
		}
		for name, req := range cases {
			f := rawExchange(t, tg, req)
			if f.Type != wire.FrameError {
				t.Errorf("%s: reply %s, want error", name, f.Type)
				continue
			}
			var re wire.RemoteError
			if err := json.Unmarshal(f.Payload, &re); err != nil || re.Message == "" || re.Code != wire.CodeInvalidArgument {
				t.Errorf("%s: error payload %s (%v)", name, f.Payload, err)
			}
		}
		if err := tg.client.Ping(testCtx(t)); err != nil {
			t.Fatalf("init broken by malformed requests: %v", err)
		}
	})
}

func TestInitReapsOrphans(t *testing.T) {
	tg := startInit(t)
	// The shell exits at once; its background child is orphaned, reparented
	// to the init (a subreaper here, PID 1 in a sandbox) and must be reaped.
	out, _, res := run(t, tg, wire.ExecRequest{Args: []string{"sh", "-c", "sleep 0.2 & echo $!"}}, nil)
	if res.ExitCode != 0 {
		t.Fatalf("%+v", res)
	}
	orphan, _ := strconv.Atoi(strings.TrimSpace(out))
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, ok := readProcStat(orphan)
		if !ok {
			break // reaped
		}
		if st.ppid != tg.init.Process.Pid && st.state != 'Z' {
			t.Fatalf("orphan %d has parent %d, not the init %d", orphan, st.ppid, tg.init.Process.Pid)
		}
		if time.Now().After(deadline) {
			t.Fatalf("orphan %d not reaped (state %c)", orphan, st.state)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// And no zombie children linger.
	time.Sleep(50 * time.Millisecond)
	for _, pid := range children(tg.init.Process.Pid) {
		if st, ok := readProcStat(pid); ok && st.state == 'Z' {
			t.Errorf("zombie child %d", pid)
		}
	}
}

// children lists pids whose parent is ppid, zombies included.
func children(ppid int) []int {
	var out []int
	names, _ := os.ReadDir("/proc")
	for _, n := range names {
		pid, err := strconv.Atoi(n.Name())
		if err != nil {
			continue
		}
		if st, ok := readProcStat(pid); ok && st.ppid == ppid {
			out = append(out, pid)
		}
	}
	return out
}

func TestInitSIGTERMKillsEverythingAndExits(t *testing.T) {
	tg := startInit(t)
	ctx := testCtx(t)
	pids := make(chan []int, 1)
	w := &pidWriter{lines: 2, cancel: func() {}, pids: pids}
	go tg.client.Exec(ctx, wire.ExecRequest{Args: []string{"sh", "-c", "sleep 100 & echo $!; echo $$; sleep 100"}}, nil, w, nil)
	// A detached daemon in a session of its own, out of reach of exec's
	// tree kill: only the init's kill-everything can get it.
	_, _, res := run(t, tg, wire.ExecRequest{Args: []string{"sh", "-c", "setsid sleep 100 >/dev/null 2>&1 < /dev/null &"}}, nil)
	if res.ExitCode != 0 {
		t.Fatalf("%+v", res)
	}
	running := <-pids
	var daemon int
	deadline := time.Now().Add(5 * time.Second)
	for daemon == 0 && time.Now().Before(deadline) {
		for _, pid := range children(tg.init.Process.Pid) {
			if st, ok := readProcStat(pid); ok && st.session == pid {
				daemon = pid
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	if err := tg.init.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := tg.init.Wait()
	if err != nil {
		t.Fatalf("init exit: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("init took %v to stop", d)
	}
	for _, pid := range append(running, daemon) {
		if pid != 0 {
			waitGone(t, pid)
		}
	}
	if daemon == 0 {
		t.Error("daemon process not found")
	}
}
