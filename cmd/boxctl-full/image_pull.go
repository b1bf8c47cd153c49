package main

import (
	"fmt"

	"connectrpc.com/connect"
	"github.com/urfave/cli/v2"

	"github.com/boxd-dev/boxd/internal/rpcclient"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

func imagePullCommand() *cli.Command {
	return &cli.Command{
		Name:      "pull",
		Usage:     "pull an image from a registry (a full reference: HOST[:PORT]/PATH[:TAG]); prints NAME<TAB>DIGEST",
		ArgsUsage: "REF",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "platform", Usage: "OS/ARCH[/VARIANT] to pick from a multi-platform image (default: this host's)"},
			&cli.BoolFlag{Name: "force", Usage: "replace a local image of the same name with another digest, even if sandboxes use it (they keep their files)"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no progress display"},
		}, authFlags()...),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return fmt.Errorf("usage: boxctl image pull [--platform P] [--force] [--username U --password-stdin] REF")
			}
			ref := c.Args().First()
			auth, err := registryAuth(c, ref)
			if err != nil {
				return err
			}
			stream, err := rpcclient.NewRegistry(c.String("socket")).PullImage(c.Context, connect.NewRequest(&boxdv1.PullImageRequest{
				Reference: ref, Platform: c.String("platform"), Auth: auth, Force: c.Bool("force"),
			}))
			if err != nil {
				return err
			}
			defer stream.Close()
			view := newProgressView(c.Bool("quiet"))
			for stream.Receive() {
				switch m := stream.Msg().Msg.(type) {
				case *boxdv1.PullImageResponse_Progress:
					view.show(m.Progress)
				case *boxdv1.PullImageResponse_Image:
					fmt.Printf("%s\t%s\n", m.Image.Name, m.Image.Digest)
					return nil
				}
			}
			if err := stream.Err(); err != nil {
				return err
			}
			return fmt.Errorf("image pull: boxd ended the stream without the image")
		},
	}
}
