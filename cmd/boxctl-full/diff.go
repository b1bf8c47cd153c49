package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"unicode/utf8"

	"connectrpc.com/connect"
	"github.com/urfave/cli/v2"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

func diffCommand() *cli.Command {
	return &cli.Command{
		Name:      "diff",
		Usage:     "list the files added (A), modified (M) and deleted (D) in a sandbox's writable layer",
		ArgsUsage: "ID",
		Description: "Compares the sandbox's files with the image it was made from (--since create, the default),\n" +
			"with its source's files when it was forked (--since fork), or with an image committed from\n" +
			"it (--since IMAGE). Volumes and binds are not listed. --patch adds a unified diff of each\n" +
			"changed text file (files up to 1 MiB, 16 MiB of patches in all).",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "since", Value: "create", Usage: "create, fork, or an image committed from the sandbox"},
			&cli.BoolFlag{Name: "patch", Aliases: []string{"p"}, Usage: "add a unified diff of each changed text file"},
			&cli.BoolFlag{Name: "json", Usage: "print the changes as one JSON object (entries, truncated, patch_truncated)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return fmt.Errorf("usage: boxctl diff [--since create|fork|IMAGE] [--patch] [--json] ID")
			}
			stream, err := apiClient(c).DiffSandbox(c.Context, connect.NewRequest(&boxdv1.DiffSandboxRequest{
				SandboxId: c.Args().Get(0), Since: c.String("since"), Patch: c.Bool("patch"),
			}))
			if err != nil {
				return err
			}
			defer stream.Close()
			all := &boxdv1.DiffSandboxResponse{}
			w := bufio.NewWriter(os.Stdout)
			for stream.Receive() {
				msg := stream.Msg()
				all.Entries = append(all.Entries, msg.Entries...)
				all.Done, all.Truncated, all.PatchTruncated = msg.Done, msg.Truncated, msg.PatchTruncated
				if !c.Bool("json") {
					for _, e := range msg.Entries {
						printDiffEntry(w, e)
					}
					all.Entries = nil
				}
			}
			if err := stream.Err(); err != nil {
				return err
			}
			if !all.Done {
				return errors.New("the diff ended early (boxd went away?)")
			}
			if c.Bool("json") {
				b, err := protoJSON.Marshal(all)
				if err != nil {
					return err
				}
				fmt.Fprintln(w, string(b))
			}
			if err := w.Flush(); err != nil {
				return err
			}
			if all.Truncated {
				fmt.Fprintln(os.Stderr, "boxctl: the listing stopped at boxd's limit (100,000 changes or 1,000,000 entries looked at)")
			}
			if all.PatchTruncated {
				fmt.Fprintln(os.Stderr, "boxctl: some patches were cut or left out (over 1 MiB, or 16 MiB in all)")
			}
			return nil
		},
	}
}

var diffLetter = map[boxdv1.DiffChange]string{
	boxdv1.DiffChange_DIFF_CHANGE_ADDED:    "A",
	boxdv1.DiffChange_DIFF_CHANGE_MODIFIED: "M",
	boxdv1.DiffChange_DIFF_CHANGE_DELETED:  "D",
}

// printDiffEntry prints one change as "A /path", the path quoted when it
// holds anything that could break the line (a name is the sandbox's:
// any bytes but / and NUL), then its patch or why there is none.
func printDiffEntry(w io.Writer, e *boxdv1.DiffEntry) {
	p := e.Path
	if e.RawPath != nil {
		p = string(e.RawPath)
	}
	fmt.Fprintf(w, "%s %s\n", diffLetter[e.Change], quoteName(p))
	switch {
	case e.Patch != "":
		io.WriteString(w, e.Patch)
	case e.Binary:
		fmt.Fprintf(w, "Binary file %s differs\n", quoteName(p))
	case e.PatchTruncated:
		fmt.Fprintf(w, "Patch of %s left out (over 1 MiB, or 16 MiB of patches in all)\n", quoteName(p))
	}
}

func quoteName(p string) string {
	if !utf8.ValidString(p) {
		return strconv.Quote(p)
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f || r == '"' || r == '\\' {
			return strconv.Quote(p)
		}
	}
	return p
}
