//go:build linux

package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/errdefs"
)

// rawExchange sends raw bytes as a request and returns the first frame of
// the reply.
func rawExchange(t *testing.T, tg *target, req []byte) Frame {
	t.Helper()
	c, err := net.Dial("unix", tg.client.socketPath)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(req); err != nil {
		t.Fatal(err)
	}
	f, err := NewFrameReader(c).ReadFrame()
	if err != nil {
		t.Fatalf("no reply: %v", err)
	}
	return Frame{Type: f.Type, Payload: bytes.Clone(f.Payload)}
}

func encodeFrame(t FrameType, p []byte) []byte {
	var b bytes.Buffer
	NewFrameWriter(&b).WriteFrame(t, p)
	return b.Bytes()
}

func TestMalformedRequests(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		cases := map[string][]byte{
			"not a frame":       []byte("GET / HTTP/1.1\r\n\r\n"),
			"oversize":          header(FrameRequest, MaxFramePayload+1),
			"not a request":     encodeFrame(FrameStdout, []byte("x")),
			"bad json":          encodeFrame(FrameRequest, []byte("{")),
			"unknown op":        encodeFrame(FrameRequest, []byte(`{"op":"format-disk"}`)),
			"exec without args": encodeFrame(FrameRequest, []byte(`{"op":"exec"}`)),
			"wrong types":       encodeFrame(FrameRequest, []byte(`{"op":"exec","exec":{"args":"sh"}}`)),
		}
		for name, req := range cases {
			f := rawExchange(t, tg, req)
			if f.Type != FrameError {
				t.Errorf("%s: reply %s, want error", name, f.Type)
				continue
			}
			var re RemoteError
			if err := json.Unmarshal(f.Payload, &re); err != nil || re.Message == "" || re.Code != CodeInvalidArgument {
				t.Errorf("%s: error payload %s (%v)", name, f.Payload, err)
			}
		}
		if err := tg.client.Ping(testCtx(t)); err != nil {
			t.Fatalf("init broken by malformed requests: %v", err)
		}
	})
}

// fakeInit serves one connection with a scripted reply, standing in for a
// compromised init.
func fakeInit(t *testing.T, reply []byte) *Client {
	d := shortTempDir(t)
	ln, err := net.Listen("unix", filepath.Join(d, "s"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				NewFrameReader(c).ReadFrame()
				c.Write(reply)
			}()
		}
	}()
	return NewClient(filepath.Join(d, "s"))
}

func TestClientDistrustsInit(t *testing.T) {
	big := bytes.Repeat([]byte("x"), MaxControlPayload+1)
	cases := map[string][]byte{
		"closes without result": encodeFrame(FrameStdout, []byte("partial")),
		"oversize frame":        header(FrameStdout, MaxFramePayload+1),
		"unknown frame":         header(77, 0),
		"huge result":           encodeFrame(FrameResult, big),
		"malformed result":      encodeFrame(FrameResult, []byte("{")),
		"tar during exec":       encodeFrame(FrameTar, nil),
		"output beyond limit": append(encodeFrame(FrameStdout, bytes.Repeat([]byte("x"), 10000)),
			encodeFrame(FrameResult, []byte("{}"))...),
	}
	for name, reply := range cases {
		t.Run(name, func(t *testing.T) {
			c := fakeInit(t, reply)
			_, err := c.Exec(testCtx(t), ExecRequest{Args: []string{"x"}, OutputLimit: 10}, nil, io.Discard, io.Discard)
			if err == nil {
				t.Fatal("exec accepted a broken reply")
			}
			if !strings.HasPrefix(err.Error(), `exec "x": `) {
				t.Fatalf("error without context: %v", err)
			}
		})
	}
	t.Run("copy-out without end", func(t *testing.T) {
		c := fakeInit(t, encodeFrame(FrameTar, []byte("data")))
		if err := c.CopyOut(testCtx(t), "/x", io.Discard); err == nil {
			t.Fatal("truncated copy-out accepted")
		}
	})
	t.Run("error codes", func(t *testing.T) {
		c := fakeInit(t, encodeFrame(FrameError, []byte(`{"message":"gone","code":"not-found"}`)))
		if _, err := c.Stat(testCtx(t), "/x"); !errdefs.IsNotFound(err) || !strings.Contains(err.Error(), "gone") {
			t.Fatalf("stat: %v", err)
		}
	})
}

func TestContextCancelBeforeReply(t *testing.T) {
	// An init that never answers: the caller's context still wins.
	d := shortTempDir(t)
	ln, err := net.Listen("unix", filepath.Join(d, "s"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			defer c.Close()
			io.Copy(io.Discard, c)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err = NewClient(filepath.Join(d, "s")).Ping(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
}

func TestInitReapsOrphans(t *testing.T) {
	tg := startInit(t)
	// The shell exits at once; its background child is orphaned, reparented
	// to the init (a subreaper here, PID 1 in a sandbox) and must be reaped.
	out, _, res := run(t, tg, ExecRequest{Args: []string{"sh", "-c", "sleep 0.2 & echo $!"}}, nil)
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
	go tg.client.Exec(ctx, ExecRequest{Args: []string{"sh", "-c", "sleep 100 & echo $!; echo $$; sleep 100"}}, nil, w, nil)
	// A detached daemon in a session of its own, out of reach of exec's
	// tree kill: only the init's kill-everything can get it.
	_, _, res := run(t, tg, ExecRequest{Args: []string{"sh", "-c", "setsid sleep 100 >/dev/null 2>&1 < /dev/null &"}}, nil)
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
