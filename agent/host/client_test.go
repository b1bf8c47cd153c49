//go:build linux

package host

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"

	"github.com/boxd-dev/boxd/agent/wire"
)

func shortTempDir(t testing.TB) string {
	d, err := os.MkdirTemp("", "boxd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
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

// fakeInit serves every connection with a scripted reply, standing in for a
// compromised init.
func fakeInit(t *testing.T, reply []byte) *Client {
	return serveInit(t, func(c net.Conn, _ *wire.FrameReader) { c.Write(reply) })
}

// serveConns listens on a fresh socket (its path is returned) until the
// test ends and runs handle on every connection, closing it after: the
// fake inits of these tests.
func serveConns(t *testing.T, handle func(c net.Conn)) string {
	t.Helper()
	sock := filepath.Join(shortTempDir(t), "s")
	ln, err := net.Listen("unix", sock)
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
				handle(c)
			}()
		}
	}()
	return sock
}

// serveInit listens where a Client dials and, on every connection, reads
// the request and then runs play, as code that took over the init would.
func serveInit(t *testing.T, play func(c net.Conn, fr *wire.FrameReader)) *Client {
	t.Helper()
	return NewClient(serveConns(t, func(c net.Conn) {
		fr := wire.NewFrameReader(c)
		if _, err := fr.ReadFrame(); err != nil { // the request
			return
		}
		play(c, fr)
	}))
}

func TestClientDistrustsInit(t *testing.T) {
	big := bytes.Repeat([]byte("x"), MaxControlPayload+1)
	cases := map[string][]byte{
		"closes without result": encodeFrame(wire.FrameStdout, []byte("partial")),
		"oversize frame":        header(wire.FrameStdout, wire.MaxFramePayload+1),
		"unknown frame":         header(77, 0),
		"huge result":           encodeFrame(wire.FrameResult, big),
		"malformed result":      encodeFrame(wire.FrameResult, []byte("{")),
		"tar during exec":       encodeFrame(wire.FrameTar, nil),
		"output beyond limit": append(encodeFrame(wire.FrameStdout, bytes.Repeat([]byte("x"), 10000)),
			encodeFrame(wire.FrameResult, []byte("{}"))...),
	}
	for name, reply := range cases {
		t.Run(name, func(t *testing.T) {
			c := fakeInit(t, reply)
			_, err := c.Exec(testCtx(t), wire.ExecRequest{Args: []string{"x"}, OutputLimit: 10}, nil, io.Discard, io.Discard)
			if err == nil {
				t.Fatal("exec accepted a broken reply")
			}
			if !strings.HasPrefix(err.Error(), `exec "x": `) {
				t.Fatalf("error without context: %v", err)
			}
		})
	}
	t.Run("copy-out without end", func(t *testing.T) {
		c := fakeInit(t, encodeFrame(wire.FrameTar, []byte("data")))
		if err := c.CopyOut(testCtx(t), "/x", io.Discard); err == nil {
			t.Fatal("truncated copy-out accepted")
		}
	})
	t.Run("error codes", func(t *testing.T) {
		c := fakeInit(t, encodeFrame(wire.FrameError, []byte(`{"message":"gone","code":"not-found"}`)))
		if _, err := c.StatFile(testCtx(t), wire.FileStatArgs{Path: "/x"}); !errdefs.IsNotFound(err) || !strings.Contains(err.Error(), "gone") {
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
