package main

import (
	"errors"
	"flag"
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
		Usage: "import, pull, push, list and remove images",
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
			{
				Name:      "rm",
				Usage:     "remove images; one that sandboxes use needs --force",
				ArgsUsage: "[--force] REF...",
				Flags: []cli.Flag{
					&cli.BoolFlag{Name: "force", Aliases: []string{"f"}, Usage: "remove even if sandboxes use the image (they keep running on their own copy)"},
				},
				Action: func(c *cli.Context) error {
					force, refs := c.Bool("force"), []string{}
					// urfave/cli v2 stops at the first argument; "rm REF --force"
					// is accepted too.
					for _, a := range c.Args().Slice() {
						if a == "--force" || a == "-f" {
							force = true
							continue
						}
						refs = append(refs, a)
					}
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
	name, rootfs, force, args, err := importArgs(c)
	if err != nil {
		return err
	}
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

// importArgs accepts the flags after FILE as well ("image import FILE.tar
// --name REF", the documented order), which urfave/cli v2 alone does not.
func importArgs(c *cli.Context) (name, rootfs string, force bool, args []string, err error) {
	name, rootfs, force = c.String("name"), c.String("rootfs"), c.Bool("force")
	rest := c.Args().Slice()
	for len(rest) > 0 {
		if len(rest[0]) > 1 && rest[0][0] == '-' {
			fs := flag.NewFlagSet("image import", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			fs.StringVar(&name, "name", name, "")
			fs.StringVar(&rootfs, "rootfs", rootfs, "")
			fs.BoolVar(&force, "force", force, "")
			if err := fs.Parse(rest); err != nil {
				return "", "", false, nil, fmt.Errorf("image import: %w", err)
			}
			rest = fs.Args()
			continue
		}
		args = append(args, rest[0])
		rest = rest[1:]
	}
	return name, rootfs, force, args, nil
}
