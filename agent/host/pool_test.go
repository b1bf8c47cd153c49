package host

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boxd-dev/boxd/agent/wire"
)

// keepInit is an init that honours request.keep for execs: each exec gets
// a stdout frame with the command's first argument and a result; after
// that, play decides what else the init does (nil: nothing). It counts the
// connections it accepted and records each request's keep flag.
type keepInit struct {
	accepts atomic.Int32
	keeps   chan bool
	liar    bool // says the connection ends although it keeps serving
}

func serveKeepInit(t *testing.T, after func(c net.Conn, fw *wire.FrameWriter) (keepGoing bool)) (*keepInit, string) {
	return serveKeepInitAs(t, &keepInit{}, after)
}

func serveKeepInitAs(t *testing.T, k *keepInit, after func(c net.Conn, fw *wire.FrameWriter) (keepGoing bool)) (*keepInit, string) {
	t.Helper()
	k.keeps = make(chan bool, 100)
	sock := serveConns(t, func(c net.Conn) {
		k.accepts.Add(1)
		fr, fw := wire.NewFrameReader(c), wire.NewFrameWriter(c)
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			var req wire.Request
			if json.Unmarshal(f.Payload, &req) != nil || req.Exec == nil {
				return
			}
			k.keeps <- req.Keep
			if req.Exec.Args[0] == "hang" {
				fr.ReadFrame() // until the host gives up
				return
			}
			fw.WriteFrame(wire.FrameStdout, []byte(req.Exec.Args[0]))
			fw.WriteJSON(wire.FrameResult, wire.ExecResult{Kept: req.Keep && !k.liar})
			if !req.Keep || (after != nil && !after(c, fw)) {
				return
			}
		}
	})
	return k, sock
}

func execOut(t *testing.T, c *Client, ctx context.Context, arg string) string {
	t.Helper()
	var out bytes.Buffer
	if _, err := c.Exec(ctx, wire.ExecRequest{Args: []string{arg}}, nil, &out, nil); err != nil {
		t.Fatalf("exec %s: %v", arg, err)
	}
	return out.String()
}

// TestPoolReusesCleanConnection: back-to-back execs on a pooled client
// share one connection, each still getting its own output and result; an
// unpooled client asks for no keep and dials every time.
func TestPoolReusesCleanConnection(t *testing.T) {
	k, sock := serveKeepInit(t, nil)
	p := NewPool()
	c := NewClient(sock).Pooled(p)
	ctx := testCtx(t)
	for i := range 5 {
		arg := strings.Repeat("x", i+1)
		if got := execOut(t, c, ctx, arg); got != arg {
			t.Fatalf("exec %d: output %q, want %q", i, got, arg)
		}
		if !<-k.keeps {
			t.Fatalf("exec %d asked for no keep", i)
		}
	}
	if n := k.accepts.Load(); n != 1 {
		t.Fatalf("5 pooled execs used %d connections, want 1", n)
	}
	if p.Idle() != 1 {
		t.Fatalf("pool holds %d connections, want 1", p.Idle())
	}
	plain := NewClient(sock)
	for range 2 {
		execOut(t, plain, ctx, "y")
		if <-k.keeps {
			t.Fatal("an unpooled client asked to keep its connection")
		}
	}
	if n := k.accepts.Load(); n != 3 {
		t.Fatalf("accepts %d, want 3 (1 pooled + 2 unpooled)", n)
	}
	p.Close()
	if p.Idle() != 0 {
		t.Fatal("Close left idle connections")
	}
	execOut(t, c, ctx, "z") // works, on a fresh connection that is then closed
	if p.Idle() != 0 {
		t.Fatal("a closed pool took a connection back")
	}
}

// TestPoolDropsConnectionInitWroteOn: an init that writes after its
// result (at once, or a moment later while the connection is idle) loses
// the connection: the next exec dials anew and sees only its own output.
func TestPoolDropsConnectionInitWroteOn(t *testing.T) {
	for _, delay := range []time.Duration{0, 50 * time.Millisecond} {
		k, sock := serveKeepInit(t, func(c net.Conn, fw *wire.FrameWriter) bool {
			time.Sleep(delay)
			fw.WriteFrame(wire.FrameStdout, []byte("INJECTED"))
			return true
		})
		p := NewPool()
		c := NewClient(sock).Pooled(p)
		ctx := testCtx(t)
		execOut(t, c, ctx, "a")
		time.Sleep(100 * time.Millisecond) // the junk has arrived
		if got := execOut(t, c, ctx, "b"); got != "b" {
			t.Fatalf("delay %v: second exec's output %q, want %q", delay, got, "b")
		}
		if n := k.accepts.Load(); n != 2 {
			t.Fatalf("delay %v: %d connections, want 2 (the dirty one not reused)", delay, n)
		}
	}
}

// TestPoolDropsClosedConnection: an init that closes after the result
// although asked to keep (an older init, or one that died) costs nothing
// but a fresh dial.
func TestPoolDropsClosedConnection(t *testing.T) {
	k, sock := serveKeepInit(t, func(net.Conn, *wire.FrameWriter) bool { return false })
	p := NewPool()
	c := NewClient(sock).Pooled(p)
	ctx := testCtx(t)
	for i := range 3 {
		if got := execOut(t, c, ctx, "a"); got != "a" {
			t.Fatalf("exec %d: %q", i, got)
		}
		time.Sleep(20 * time.Millisecond) // the close has arrived
	}
	if n := k.accepts.Load(); n != 3 {
		t.Fatalf("%d connections, want 3", n)
	}

	// An init whose result does not say kept is not reused, even if it
	// would go on serving: only its word makes a connection reusable.
	k, sock = serveKeepInitAs(t, &keepInit{liar: true}, nil)
	p = NewPool()
	c = NewClient(sock).Pooled(p)
	for range 3 {
		execOut(t, c, ctx, "a")
	}
	if n := k.accepts.Load(); n != 3 || p.Idle() != 0 {
		t.Fatalf("%d connections, %d idle; want 3 and 0", n, p.Idle())
	}
}

// TestPoolSkipsStdinAndCancelled: an exec with streamed stdin never asks to
// keep its connection, and one whose context ended never returns it.
func TestPoolSkipsStdinAndCancelled(t *testing.T) {
	k, sock := serveKeepInit(t, nil)
	p := NewPool()
	c := NewClient(sock).Pooled(p)
	ctx := testCtx(t)
	var out bytes.Buffer
	if _, err := c.Exec(ctx, wire.ExecRequest{Args: []string{"s"}}, strings.NewReader("input"), &out, nil); err != nil {
		t.Fatal(err)
	}
	if <-k.keeps {
		t.Fatal("an exec with stdin asked to keep its connection")
	}
	if p.Idle() != 0 {
		t.Fatal("an exec with stdin returned its connection")
	}
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := c.Exec(cctx, wire.ExecRequest{Args: []string{"hang"}}, nil, nil, nil); err == nil {
		t.Fatal("a hanging exec returned without error")
	}
	<-k.keeps
	if p.Idle() != 0 {
		t.Fatal("a cancelled exec returned its connection")
	}
	if got := execOut(t, c, ctx, "after"); got != "after" {
		t.Fatalf("exec after a cancel: %q", got)
	}
}
