package host

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/boxd-dev/boxd/agent/wire"
)

// SetDefaults changes the environment and working directory of commands
// started from now on.
func (c *Client) SetDefaults(ctx context.Context, d wire.Defaults) error {
	args, err := json.Marshal(d)
	if err != nil {
		return err
	}
	return c.simple(ctx, wire.Request{Op: wire.OpSetDefaults, Args: args}, "set defaults")
}

// Terminate has the init send SIGTERM to every other process.
func (c *Client) Terminate(ctx context.Context) error {
	return c.simple(ctx, wire.Request{Op: wire.OpTerminate}, "terminate")
}

func (c *Client) simple(ctx context.Context, req wire.Request, what string) error {
	cn, err := c.open(ctx, req)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer cn.close()
	if err := cn.readReply(wire.FrameOK, nil); err != nil {
		return fmt.Errorf("%s: %w", what, ctxErr(ctx, err))
	}
	return nil
}
