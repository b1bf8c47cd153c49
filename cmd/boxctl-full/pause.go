package main

import (
	"fmt"
	"os"

	"connectrpc.com/connect"
	"github.com/urfave/cli/v2"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// pauseCommand and unpauseCommand freeze and thaw sandboxes (docker
// pause/unpause): a paused sandbox keeps its processes and files and uses
// no CPU.
func pauseCommand() *cli.Command {
	return &cli.Command{
		Name:      "pause",
		Usage:     "freeze every process of sandboxes (they keep memory and files, use no CPU)",
		ArgsUsage: "ID...",
		Action: func(c *cli.Context) error {
			return eachSandbox(c, "pause", func(id string) error {
				_, err := apiClient(c).PauseSandbox(c.Context, connect.NewRequest(&boxdv1.PauseSandboxRequest{Id: id}))
				return err
			})
		},
	}
}

func unpauseCommand() *cli.Command {
	return &cli.Command{
		Name:      "unpause",
		Usage:     "thaw paused sandboxes",
		ArgsUsage: "ID...",
		Action: func(c *cli.Context) error {
			return eachSandbox(c, "unpause", func(id string) error {
				_, err := apiClient(c).UnpauseSandbox(c.Context, connect.NewRequest(&boxdv1.UnpauseSandboxRequest{Id: id}))
				return err
			})
		},
	}
}

// eachSandbox runs do for every argument, printing each id done and each
// failure, and fails if any did.
func eachSandbox(c *cli.Context, verb string, do func(id string) error) error {
	if c.NArg() == 0 {
		return fmt.Errorf("usage: boxctl %s ID...", verb)
	}
	failed := false
	for _, id := range c.Args().Slice() {
		if err := do(id); err != nil {
			fmt.Fprintf(os.Stderr, "boxctl: %s %s: %s\n", verb, id, describe(err))
			failed = true
			continue
		}
		fmt.Println(id)
	}
	if failed {
		return exitError{1}
	}
	return nil
}
