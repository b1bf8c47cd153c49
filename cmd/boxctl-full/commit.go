package main

import (
	"fmt"

	"connectrpc.com/connect"
	"github.com/urfave/cli/v2"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

func commitCommand() *cli.Command {
	return &cli.Command{
		Name:      "commit",
		Usage:     "make an image from a sandbox's files (it keeps running; frozen for a moment while its files are read)",
		ArgsUsage: "ID REF",
		Description: "The sandbox's writable layer becomes a new layer on top of its image, with ownership as the\n" +
			"sandbox saw it (root inside is root in the image), and the sandbox's env and workdir in the\n" +
			"image config. Prints the image's name and digest.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "message", Aliases: []string{"m"}, Usage: "comment for the image history"},
			&cli.BoolFlag{Name: "force", Usage: "replace an image that already exists under REF"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 2 {
				return fmt.Errorf("usage: boxctl commit [--message TEXT] [--force] ID REF")
			}
			resp, err := apiClient(c).CommitSandbox(c.Context, connect.NewRequest(&boxdv1.CommitSandboxRequest{
				SandboxId: c.Args().Get(0), Ref: c.Args().Get(1), Message: c.String("message"), Force: c.Bool("force"),
			}))
			if err != nil {
				return err
			}
			fmt.Printf("%s\t%s\n", resp.Msg.Image.Name, resp.Msg.Image.Digest)
			return nil
		},
	}
}
