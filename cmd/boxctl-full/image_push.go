package main

import (
	"fmt"

	"connectrpc.com/connect"
	"github.com/urfave/cli/v2"

	"github.com/boxd-dev/boxd/internal/rpcclient"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

func imagePushCommand() *cli.Command {
	return &cli.Command{
		Name:      "push",
		Usage:     "push a local image to a registry (a full reference: HOST[:PORT]/PATH[:TAG]); prints REF<TAB>DIGEST",
		ArgsUsage: "REF",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "from", Usage: "local image to push (default: REF itself)"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no progress display"},
		}, authFlags()...),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return fmt.Errorf("usage: boxctl image push [--from LOCAL] [--username U --password-stdin] REF")
			}
			ref := c.Args().First()
			auth, err := registryAuth(c, ref)
			if err != nil {
				return err
			}
			stream, err := rpcclient.NewRegistry(c.String("socket")).PushImage(c.Context, connect.NewRequest(&boxdv1.PushImageRequest{
				Reference: ref, Source: c.String("from"), Auth: auth,
			}))
			if err != nil {
				return err
			}
			defer stream.Close()
			view := newProgressView(c.Bool("quiet"))
			for stream.Receive() {
				switch m := stream.Msg().Msg.(type) {
				case *boxdv1.PushImageResponse_Progress:
					view.show(m.Progress)
				case *boxdv1.PushImageResponse_Digest:
					fmt.Printf("%s\t%s\n", ref, m.Digest)
					return nil
				}
			}
			if err := stream.Err(); err != nil {
				return err
			}
			return fmt.Errorf("image push: boxd ended the stream without the digest")
		},
	}
}
