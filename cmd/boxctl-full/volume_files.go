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

// volumePath reads VOLUME:/PATH (VOLUME alone: its root when root is
// allowed).
func volumePath(s string, root bool) (vol, p string, err error) {
	if v, p, ok := splitVolume(s); ok {
		return v, p, nil
	}
	if root && s != "" && !strings.Contains(s, ":") {
		return s, "/", nil
	}
	return "", "", fmt.Errorf("%q: want VOLUME:/PATH (an absolute path in the volume)", s)
}

// volumeFileCommands are the file API on a volume without a sandbox:
// ls-files, stat and cat.
func volumeFileCommands() []*cli.Command {
	jsonFlag := &cli.BoolFlag{Name: "json", Usage: "print JSON"}
	return []*cli.Command{{
		Name: "ls-files", Usage: "list a directory of a volume no sandbox mounts read-write (symlinks listed, never followed)",
		ArgsUsage: "VOLUME[:/PATH]", Flags: []cli.Flag{jsonFlag},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return fmt.Errorf("usage: boxctl volume ls-files [--json] VOLUME[:/PATH]")
			}
			vol, p, err := volumePath(c.Args().First(), true)
			if err != nil {
				return err
			}
			resp, err := rpcclient.NewVolumes(c.String("socket")).ListVolumeDir(c.Context,
				connect.NewRequest(&boxdv1.ListVolumeDirRequest{Name: vol, Path: p}))
			if err != nil {
				return boxdErr{err}
			}
			if c.Bool("json") {
				return printJSON(resp.Msg)
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 1, ' ', tabwriter.AlignRight)
			for _, fi := range resp.Msg.Entries {
				fmt.Fprintln(tw, fileLine(fi, fi.Path))
			}
			if resp.Msg.Truncated {
				fmt.Fprintf(c.App.ErrWriter, "boxctl: only the first %d entries are listed\n", len(resp.Msg.Entries))
			}
			return tw.Flush()
		},
	}, {
		Name: "stat", Usage: "describe a path in a volume no sandbox mounts read-write (a symlink itself)",
		ArgsUsage: "VOLUME:/PATH", Flags: []cli.Flag{jsonFlag},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return fmt.Errorf("usage: boxctl volume stat [--json] VOLUME:/PATH")
			}
			vol, p, err := volumePath(c.Args().First(), false)
			if err != nil {
				return err
			}
			resp, err := rpcclient.NewVolumes(c.String("socket")).StatVolumePath(c.Context,
				connect.NewRequest(&boxdv1.StatVolumePathRequest{Name: vol, Path: p}))
			if err != nil {
				return boxdErr{err}
			}
			if c.Bool("json") {
				return printJSON(resp.Msg.Info)
			}
			return printStat(resp.Msg.Info)
		},
	}, {
		Name: "cat", Usage: "print a regular file of a volume no sandbox mounts read-write (never through a symlink)",
		ArgsUsage: "VOLUME:/PATH",
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return fmt.Errorf("usage: boxctl volume cat VOLUME:/PATH")
			}
			vol, p, err := volumePath(c.Args().First(), false)
			if err != nil {
				return err
			}
			stream, err := rpcclient.NewVolumes(c.String("socket")).ReadVolumeFile(c.Context,
				connect.NewRequest(&boxdv1.ReadVolumeFileRequest{Name: vol, Path: p}))
			if err != nil {
				return boxdErr{err}
			}
			defer stream.Close()
			for stream.Receive() {
				if _, err := os.Stdout.Write(stream.Msg().Data); err != nil {
					return err
				}
			}
			if err := stream.Err(); err != nil {
				return boxdErr{err}
			}
			return nil
		},
	}}
}
