package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"connectrpc.com/connect"
	"github.com/urfave/cli/v2"

	"github.com/boxd-dev/boxd/internal/safetar"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

func imageCommand() *cli.Command {
	return &cli.Command{
		Name:  "image",
		Usage: "import, pull, push, tag, list and remove images",
		Subcommands: []*cli.Command{
			imagePullCommand(),
			imagePushCommand(),
			{
				Name:      "import",
				Usage:     "import an OCI-layout or docker-archive tar, or a root filesystem directory (--rootfs)",
				ArgsUsage: "FILE.tar | --rootfs DIR --name REF",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "name", Usage: "image reference to give the import"},
					&cli.StringFlag{Name: "rootfs", Usage: "directory holding a root filesystem; becomes a one-layer image"},
					&cli.BoolFlag{Name: "force", Usage: "replace an image that already exists under the name, even if sandboxes use it (they keep their files)"},
				},
				Action: imageImport,
			},
			{
				Name:  "ls",
				Usage: "list images (--json adds their labels: who imported or replaced each)",
				Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON"}},
				Action: func(c *cli.Context) error {
					resp, err := apiClient(c).ListImages(c.Context, connect.NewRequest(&boxdv1.ListImagesRequest{}))
					if err != nil {
						return err
					}
					if c.Bool("json") {
						return printJSONArray(resp.Msg.Images)
					}
					tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
					fmt.Fprintln(tw, "NAME\tDIGEST\tSIZE")
					for _, im := range resp.Msg.Images {
						fmt.Fprintf(tw, "%s\t%s\t%s\n", im.Name, im.Digest, humanSize(im.Size))
					}
					return tw.Flush()
				},
			},
			imageTagCommand(),
			{
				Name:      "rm",
				Usage:     "remove images; one that sandboxes use needs --force",
				ArgsUsage: "[--force] REF...",
				Flags: []cli.Flag{
					&cli.BoolFlag{Name: "force", Aliases: []string{"f"}, Usage: "remove even if sandboxes use the image (they keep running on their own copy)"},
				},
				Action: func(c *cli.Context) error {
					force, refs := c.Bool("force"), c.Args().Slice()
					if len(refs) == 0 {
						return fmt.Errorf("usage: boxctl image rm [--force] REF...")
					}
					for _, ref := range refs {
						if _, err := apiClient(c).RemoveImage(c.Context, connect.NewRequest(&boxdv1.RemoveImageRequest{Name: ref, Force: force})); err != nil {
							return err
						}
						fmt.Println(ref)
					}
					return nil
				},
			},
		},
	}
}

func humanSize(b int64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d B", b)
}

func imageImport(c *cli.Context) error {
	// flagsFirst has read the flags written after FILE (the documented
	// order, image import FILE.tar --name REF).
	name, rootfs, force, args := c.String("name"), c.String("rootfs"), c.Bool("force"), c.Args().Slice()
	var (
		open   func() (io.ReadCloser, error)
		format boxdv1.ImageFormat
	)
	switch dir := rootfs; {
	case dir != "":
		if len(args) > 0 {
			return fmt.Errorf("image import --rootfs DIR takes no FILE argument")
		}
		if name == "" {
			return fmt.Errorf("image import --rootfs needs --name REF")
		}
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return fmt.Errorf("--rootfs %s: not a directory", dir)
		}
		open = func() (io.ReadCloser, error) {
			return tarPipe(func(w io.Writer) error { return safetar.WriteRootfs(w, dir) }), nil
		}
		format = boxdv1.ImageFormat_IMAGE_FORMAT_ROOTFS
	case len(args) == 1:
		open = func() (io.ReadCloser, error) { return os.Open(args[0]) }
		format = boxdv1.ImageFormat_IMAGE_FORMAT_TAR
	default:
		return fmt.Errorf("usage: boxctl image import FILE.tar [--name REF] | --rootfs DIR --name REF")
	}
	resp, err := importOnce(c, open, name, format, force)
	var ce *connect.Error
	if errors.As(err, &ce) && ce.Code() == connect.CodeInvalidArgument && len(args) == 1 {
		// boxd names the request's field (data); the user knows the file.
		return connect.NewError(ce.Code(), fmt.Errorf("%s: %s", args[0], ce.Message()))
	}
	if err != nil {
		return err
	}
	for _, im := range resp.Msg.Images {
		fmt.Printf("%s\t%s\n", im.Name, im.Digest)
	}
	return nil
}

// importOnce streams the input to boxd in chunks.
func importOnce(c *cli.Context, open func() (io.ReadCloser, error), name string, format boxdv1.ImageFormat, force bool) (*connect.Response[boxdv1.ImportImageResponse], error) {
	r, err := open()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	stream := apiClient(c).ImportImage(c.Context)
	first := true
	err = sendChunks(r, func(b []byte) error {
		msg := &boxdv1.ImportImageRequest{Data: b}
		if first {
			msg.Name, msg.Format, msg.Force, first = name, format, force, false
		}
		return stream.Send(msg)
	})
	if err != nil && !errors.Is(err, io.EOF) {
		_, _ = stream.CloseAndReceive()
		return nil, err
	}
	if first {
		_, _ = stream.CloseAndReceive()
		return nil, fmt.Errorf("image import: the input is empty")
	}
	return stream.CloseAndReceive()
}

func imageTagCommand() *cli.Command {
	return &cli.Command{
		Name:      "tag",
		Usage:     "give an image a second name: TARGET names the same image as SOURCE (same digest), as docker tag does",
		ArgsUsage: "SOURCE TARGET",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "force", Aliases: []string{"f"}, Usage: "replace an image that already exists under TARGET, even if sandboxes use it (they keep their files)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 2 {
				return fmt.Errorf("usage: boxctl image tag [--force] SOURCE TARGET")
			}
			resp, err := apiClient(c).TagImage(c.Context, connect.NewRequest(&boxdv1.TagImageRequest{
				Source: c.Args().Get(0), Target: c.Args().Get(1), Force: c.Bool("force"),
			}))
			if err != nil {
				return err
			}
			fmt.Printf("%s %s\n", resp.Msg.Image.GetName(), resp.Msg.Image.GetDigest())
			return nil
		},
	}
}
