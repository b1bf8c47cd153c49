package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"github.com/urfave/cli/v2"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

func runCommand() *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "create a sandbox, run one command in it, delete it",
		ArgsUsage: "-- CMD [ARG...]",
		// --env and --workdir set the sandbox.
		Flags: append(createFlags(), execFlags()[0],
			&cli.BoolFlag{Name: "wait-delete", Usage: "return only once the sandbox is torn down (default: once it is deleted, its teardown going on in boxd)"}),
		Action: func(c *cli.Context) error {
			cmd := c.Args().Slice()
			if len(cmd) > 0 && cmd[0] == "--" {
				cmd = cmd[1:]
			}
			if len(cmd) == 0 {
				return fmt.Errorf("usage: boxctl run [flags] -- CMD [ARG...]")
			}
			creq, err := createRequest(c)
			if err != nil {
				return err
			}
			api := apiClient(c)
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
			defer stop()
			resp, err := api.CreateSandbox(ctx, connect.NewRequest(creq))
			if err != nil {
				return boxdErr{err}
			}
			id := resp.Msg.Sandbox.Id
			defer func() {
				// Delete even when interrupted: a one-shot run leaves nothing.
				dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				// The command has ended: nothing of it needs a grace period,
				// and boxd finishes the teardown without the caller waiting.
				del := &boxdv1.DeleteSandboxRequest{Id: id, Force: true, Background: !c.Bool("wait-delete")}
				if _, err := api.DeleteSandbox(dctx, connect.NewRequest(del)); err != nil {
					fmt.Fprintf(os.Stderr, "boxctl: delete sandbox %s: %s\n", id, describe(err))
				}
			}()
			return runExec(ctx, api, &boxdv1.ExecRequest{SandboxId: id, Args: cmd, Timeout: c.String("timeout")})
		},
	}
}
