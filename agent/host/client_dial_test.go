//go:build linux

package host

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/boxd-dev/boxd/agent/wire"
)

// TestDialHostileInit: an init that answers a dial with a huge frame, a
// wrong frame, or nothing at all gets an error from Dial, promptly and
// without boxd allocating what it claims.
func TestDialHostileInit(t *testing.T) {
	for _, tc := range []struct {
		name string
		play func(fr *wire.FrameReader, fw *wire.FrameWriter)
		want error
	}{
		{"huge ok", func(_ *wire.FrameReader, fw *wire.FrameWriter) {
			fw.WriteFrame(wire.FrameOK, make([]byte, wire.MaxFramePayload))
		}, wire.ErrFrameTooLarge},
		{"stdout instead of ok", func(_ *wire.FrameReader, fw *wire.FrameWriter) {
			fw.WriteFrame(wire.FrameStdout, []byte("hi"))
		}, wire.ErrProtocol},
		{"silence", func(fr *wire.FrameReader, _ *wire.FrameWriter) {
			fr.ReadFrame() // blocks until boxd gives up
		}, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := hostileInit(t, tc.play)
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			start := time.Now()
			conn, err := c.Dial(ctx, 80)
			if err == nil {
				conn.Close()
			}
			if !errors.Is(err, tc.want) {
				t.Errorf("Dial: %v, want %v", err, tc.want)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("Dial took %v", d)
			}
		})
	}
}
