package main

import (
	"fmt"

	"connectrpc.com/connect"
	"github.com/urfave/cli/v2"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// checkpointCommand and restoreCommand save a gVisor sandbox's processes
// to disk and bring them back (docs/checkpoint.md).
func checkpointCommand() *cli.Command {
	return &cli.Command{
		Name:      "checkpoint",
		Usage:     "write a gVisor sandbox's processes, memory and files to disk and free its memory (restore brings it back)",
		ArgsUsage: "ID",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "leave-running", Usage: "keep the sandbox running after the checkpoint is written"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return fmt.Errorf("usage: boxctl checkpoint [--leave-running] ID")
			}
			resp, err := apiClient(c).CheckpointSandbox(c.Context, connect.NewRequest(&boxdv1.CheckpointSandboxRequest{
				Id: c.Args().First(), LeaveRunning: c.Bool("leave-running"),
			}))
			if err != nil {
				return err
			}
			m := resp.Msg
			fmt.Printf("%s\t%s\t%d bytes\tpaused %s\n", m.Id, m.State, m.Bytes, m.Pause)
			return nil
		},
	}
}

func restoreCommand() *cli.Command {
	return &cli.Command{
		Name:      "restore",
		Usage:     "bring checkpointed sandboxes back with their processes",
		ArgsUsage: "ID...",
		Action: func(c *cli.Context) error {
			return eachSandbox(c, "restore", func(id string) error {
				_, err := apiClient(c).RestoreSandbox(c.Context, connect.NewRequest(&boxdv1.RestoreSandboxRequest{Id: id}))
				return err
			})
		},
	}
}

// restoreIfCheckpointed restores sandbox id if it is checkpointed (exec
// --resume).
func restoreIfCheckpointed(c *cli.Context, id string) error {
	sb, err := apiClient(c).GetSandbox(c.Context, connect.NewRequest(&boxdv1.GetSandboxRequest{Id: id}))
	if err != nil || sb.Msg.Sandbox.GetState() != "checkpointed" {
		return nil // the exec reports what is wrong
	}
	_, err = apiClient(c).RestoreSandbox(c.Context, connect.NewRequest(&boxdv1.RestoreSandboxRequest{Id: id}))
	return err
}
