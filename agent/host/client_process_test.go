//go:build linux

package host

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"testing"

	"github.com/boxd-dev/boxd/agent/wire"
)

func TestClientDistrustsProcessReplies(t *testing.T) {
	cases := map[string][]byte{
		"bad id":            encodeFrame(wire.FrameResult, []byte(`{"id":"../x","state":"running"}`)),
		"bad state":         encodeFrame(wire.FrameResult, []byte(`{"id":"p1","state":"zombie"}`)),
		"exited, no result": encodeFrame(wire.FrameResult, []byte(`{"id":"p1","state":"exited"}`)),
		"huge":              encodeFrame(wire.FrameResult, bytes.Repeat([]byte(" "), MaxControlPayload+1)),
		"output":            encodeFrame(wire.FrameStdout, []byte("x")),
	}
	for name, reply := range cases {
		t.Run(name, func(t *testing.T) {
			c := fakeInit(t, reply)
			if _, err := c.StartProcess(testCtx(t), wire.ProcessSpec{ExecRequest: wire.ExecRequest{Args: []string{"x"}}}); err == nil {
				t.Fatal("accepted")
			}
			if _, _, err := c.AttachProcess(testCtx(t), wire.AttachArgs{ID: "p1"}); err == nil {
				t.Fatal("attach accepted")
			}
		})
	}
	t.Run("session exec", func(t *testing.T) {
		for name, reply := range map[string][]byte{
			"beyond limit": append(encodeFrame(wire.FrameStdout, bytes.Repeat([]byte("x"), 10000)), encodeFrame(wire.FrameResult, []byte("{}"))...),
			"malformed":    encodeFrame(wire.FrameResult, []byte("[")),
			"tar":          encodeFrame(wire.FrameTar, nil),
			"no result":    encodeFrame(wire.FrameStderr, []byte("x")),
		} {
			c := fakeInit(t, reply)
			if _, err := c.SessionExec(testCtx(t), wire.SessionCommand{Name: "s", Command: "x", OutputLimit: 10}, io.Discard, io.Discard); err == nil {
				t.Errorf("%s: accepted", name)
			}
		}
	})
	t.Run("too many processes", func(t *testing.T) {
		infos := make([]wire.ProcessInfo, wire.MaxProcesses+1)
		for i := range infos {
			infos[i] = wire.ProcessInfo{ID: "p" + strconv.Itoa(i+1), State: wire.StateRunning}
		}
		b, _ := json.Marshal(infos)
		if _, err := fakeInit(t, encodeFrame(wire.FrameResult, b)).ListProcesses(testCtx(t)); err == nil {
			t.Fatal("accepted")
		}
	})
	t.Run("output beyond limit", func(t *testing.T) {
		c := fakeInit(t, append(encodeFrame(wire.FrameStdout, bytes.Repeat([]byte("x"), 10000)), encodeFrame(wire.FrameResult, []byte("{}"))...))
		ps, err := c.ExecProcess(testCtx(t), wire.ProcessSpec{ExecRequest: wire.ExecRequest{Args: []string{"x"}, OutputLimit: 10}}, true)
		if err != nil {
			t.Fatal(err)
		}
		defer ps.Close()
		if _, err := ps.Next(); err == nil || errors.Is(err, io.EOF) {
			t.Fatalf("accepted output beyond the limit: %v", err)
		}
	})
}
