package host

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"time"

	"github.com/boxd-dev/boxd/agent/wire"
)

// dialHandshake bounds the wait for the init's answer to a dial: a hostile
// or wedged init must not hold a published port's connection in boxd
// forever before any byte has moved.
const dialHandshake = 15 * time.Second

// Dial opens a connection to 127.0.0.1:port inside the sandbox, through
// the init (wire.OpDial). The returned connection carries the sandbox
// connection's bytes as they are; CloseWrite on it is passed on as a
// half-close. Whatever it delivers comes from the sandbox: callers copy it
// with bounded buffers (wire.Splice) and never interpret it.
func (c *Client) Dial(ctx context.Context, port int) (*net.UnixConn, error) {
	args, _ := json.Marshal(wire.DialArgs{Port: port})
	ctx, cancel := context.WithTimeout(ctx, dialHandshake)
	defer cancel()
	nc, err := c.dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("dial sandbox port %d: %w", port, err)
	}
	uc := nc.(*net.UnixConn)
	wire.SetDialSocketBuffers(uc)
	stop := context.AfterFunc(ctx, func() { uc.Close() })
	f, err := handshake(uc, args)
	if !stop() {
		err = ctx.Err()
	}
	if err == nil && f.Type == wire.FrameError {
		err = wire.DecodeRemoteError(f.Payload)
	} else if err == nil && f.Type != wire.FrameOK {
		err = wire.UnexpectedFrame(f.Type)
	}
	if err != nil {
		uc.Close()
		return nil, fmt.Errorf("dial sandbox port %d: %w", port, err)
	}
	return uc, nil
}

// handshake sends the dial request and reads the one reply frame without
// reading past it: the sandbox's bytes may follow at once.
func handshake(uc *net.UnixConn, args []byte) (wire.Frame, error) {
	if err := wire.NewFrameWriter(uc).WriteJSON(wire.FrameRequest, wire.Request{Op: wire.OpDial, Args: args}); err != nil {
		return wire.Frame{}, err
	}
	return wire.ReadReplyUnbuffered(uc, MaxControlPayload)
}
