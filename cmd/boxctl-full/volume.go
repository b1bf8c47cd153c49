package main

import (
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"connectrpc.com/connect"
	"github.com/urfave/cli/v2"

	"github.com/boxd-dev/boxd/internal/rpcclient"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// volumeCommand is `boxctl volume`: named volumes that outlive the
// sandboxes mounting them (create --volume NAME:/PATH[:ro]).
func volumeCommand() *cli.Command {
	one := func(usage string) func(c *cli.Context) (string, error) {
		return func(c *cli.Context) (string, error) {
			if c.NArg() != 1 {
				return "", fmt.Errorf("usage: boxctl volume %s", usage)
			}
			return c.Args().First(), nil
		}
	}
	return &cli.Command{
		Name:  "volume",
		Usage: "named volumes: filesystems of a fixed size that outlive sandboxes (create --volume NAME:/PATH[:ro])",
		Subcommands: append([]*cli.Command{
			{
				Name: "create", Usage: "make an empty volume", ArgsUsage: "NAME",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "size", Usage: "size cap, e.g. 2g (default 1g); writes past it fail with ENOSPC"},
					&cli.StringSliceFlag{Name: "label", Aliases: []string{"l"}, Usage: "K=V, repeatable"},
					&cli.BoolFlag{Name: "shared", Usage: "allow several read-write mounts at once (see docs/volumes.md)"},
					&cli.StringFlag{Name: "from", Usage: "NAME[@SNAP]: a copy of your volume NAME, or of its snapshot SNAP"},
				},
				Action: func(c *cli.Context) error {
					name, err := one("create NAME [--size 2g] [--label K=V] [--shared]")(c)
					if err != nil {
						return err
					}
					labels, err := parseKV("label", c.StringSlice("label"))
					if err != nil {
						return err
					}
					resp, err := rpcclient.NewVolumes(c.String("socket")).CreateVolume(c.Context, connect.NewRequest(&boxdv1.CreateVolumeRequest{
						Name: name, Size: c.String("size"), Labels: labels, Shared: c.Bool("shared"), From: c.String("from")}))
					if err != nil {
						return boxdErr{err}
					}
					fmt.Println(resp.Msg.Volume.Name)
					return nil
				},
			},
			{
				Name: "ls", Usage: "list volumes", Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON"}},
				Action: func(c *cli.Context) error {
					resp, err := rpcclient.NewVolumes(c.String("socket")).ListVolumes(c.Context, connect.NewRequest(&boxdv1.ListVolumesRequest{}))
					if err != nil {
						return boxdErr{err}
					}
					if c.Bool("json") {
						return printJSONArray(resp.Msg.Volumes)
					}
					tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
					fmt.Fprintln(tw, "NAME\tID\tSIZE\tUSED\tOWNER\tMOUNTED BY")
					for _, v := range resp.Msg.Volumes {
						fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", v.Name, v.Id, humanBytes(v.SizeBytes), humanBytes(v.UsedBytes), v.OwnerUid, mountedBy(v))
					}
					return tw.Flush()
				},
			},
			{
				Name: "inspect", Usage: "describe a volume (JSON): size, used bytes, who mounts it", ArgsUsage: "NAME",
				Action: func(c *cli.Context) error {
					name, err := one("inspect NAME")(c)
					if err != nil {
						return err
					}
					resp, err := rpcclient.NewVolumes(c.String("socket")).GetVolume(c.Context, connect.NewRequest(&boxdv1.GetVolumeRequest{Name: name}))
					if err != nil {
						return boxdErr{err}
					}
					b, err := protoJSON.Marshal(resp.Msg.Volume)
					if err != nil {
						return err
					}
					fmt.Println(string(b))
					return nil
				},
			},
			volumeCpCommand(),
			{
				Name: "snapshot", Usage: "keep a copy of a volume's files as they are now (for create --from NAME@SNAP)", ArgsUsage: "NAME SNAP",
				Action: func(c *cli.Context) error {
					if c.NArg() != 2 {
						return fmt.Errorf("usage: boxctl volume snapshot NAME SNAP")
					}
					_, err := rpcclient.NewVolumes(c.String("socket")).SnapshotVolume(c.Context, connect.NewRequest(&boxdv1.SnapshotVolumeRequest{
						Name: c.Args().Get(0), Snapshot: c.Args().Get(1)}))
					if err != nil {
						return boxdErr{err}
					}
					return nil
				},
			},
			{
				Name: "rm", Usage: "delete a volume, its snapshots and its data", ArgsUsage: "NAME",
				Flags: []cli.Flag{&cli.BoolFlag{Name: "force", Aliases: []string{"f"}, Usage: "even while sandboxes mount it (their I/O there then fails)"}},
				Action: func(c *cli.Context) error {
					name, err := one("rm [--force] NAME")(c)
					if err != nil {
						return err
					}
					_, err = rpcclient.NewVolumes(c.String("socket")).RemoveVolume(c.Context, connect.NewRequest(&boxdv1.RemoveVolumeRequest{Name: name, Force: c.Bool("force")}))
					if err != nil {
						return boxdErr{err}
					}
					return nil
				},
			},
		}, volumeFileCommands()...),
	}
}

// mountedBy lists a volume's mounts as SANDBOX[:ro].
func mountedBy(v *boxdv1.Volume) string {
	var out []string
	for _, m := range v.Mounts {
		s := m.SandboxId
		if m.ReadOnly {
			s += ":ro"
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ",")
}
