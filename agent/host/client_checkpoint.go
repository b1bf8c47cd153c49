package host

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/boxd-dev/boxd/agent/wire"
)

// CheckpointPrepare has a gVisor sandbox's init let go of its host
// sockets and keep secret (wire.OpCheckpointPrepare). It returns once the
// init has closed this connection too: the init then holds none.
func (c *Client) CheckpointPrepare(ctx context.Context, secret []byte) error {
	args, err := json.Marshal(wire.CheckpointPrepare{Secret: secret})
	if err != nil {
		return err
	}
	cn, err := c.open(ctx, wire.Request{Op: wire.OpCheckpointPrepare, Args: args})
	if err != nil {
		return fmt.Errorf("checkpoint prepare: %w", err)
	}
	defer cn.close()
	if err := cn.readReply(wire.FrameOK, nil); err != nil {
		return fmt.Errorf("checkpoint prepare: %w", ctxErr(ctx, err))
	}
	// The init closes its end right after the ok; anything else is not
	// an init that did what was asked.
	cn.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := io.Copy(io.Discard, io.LimitReader(cn.c, 1)); n != 0 || err != nil {
		return fmt.Errorf("checkpoint prepare: the init did not close its channel (%d bytes, %v)", n, err)
	}
	return nil
}

// CheckpointResume asks the init for its proof of the secret of the last
// checkpoint-prepare, for nonce (wire.OpCheckpointResume). The caller
// compares it with wire.CheckpointMAC.
func (c *Client) CheckpointResume(ctx context.Context, nonce []byte) ([]byte, error) {
	args, err := json.Marshal(wire.CheckpointResume{Nonce: nonce})
	if err != nil {
		return nil, err
	}
	cn, err := c.open(ctx, wire.Request{Op: wire.OpCheckpointResume, Args: args})
	if err != nil {
		return nil, fmt.Errorf("checkpoint resume: %w", err)
	}
	defer cn.close()
	var p wire.CheckpointProof
	if err := cn.readReply(wire.FrameOK, &p); err != nil {
		return nil, fmt.Errorf("checkpoint resume: %w", ctxErr(ctx, err))
	}
	return p.MAC, nil
}
