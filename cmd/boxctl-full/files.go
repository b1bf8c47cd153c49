package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"connectrpc.com/connect"
	"github.com/urfave/cli/v2"

	"github.com/boxd-dev/boxd/internal/rpcclient"
	"github.com/boxd-dev/boxd/rpc/apiwire"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
)

// fileChunk is the data of one message boxctl streams to boxd: large
// enough to amortise per-message costs, well below the 8 MiB message cap.
const fileChunk = apiwire.StreamChunkBytes

func filesClient(c *cli.Context) boxdv1connect.FileServiceClient {
	return rpcclient.NewFiles(c.String("socket"))
}

var userFlag = &cli.StringFlag{Name: "user", Aliases: []string{"u"}, Usage: "act as this sandbox user: NAME, UID, NAME:GROUP or UID:GID (default: the sandbox's root)"}

// parseMode reads an octal mode such as 0644 or 755.
func parseMode(s string) (uint32, error) {
	m, err := strconv.ParseUint(s, 8, 32)
	if err != nil || m > 0o7777 {
		return 0, fmt.Errorf("mode %q: want octal permission bits such as 0644 (at most 07777)", s)
	}
	return uint32(m), nil
}

func optionalMode(c *cli.Context) (*uint32, error) {
	if !c.IsSet("mode") {
		return nil, nil
	}
	m, err := parseMode(c.String("mode"))
	return &m, err
}

func wantArgs(c *cli.Context, n int, usage string) error {
	if c.NArg() != n {
		return fmt.Errorf("usage: boxctl files %s %s", c.Command.Name, usage)
	}
	return nil
}

func filesCommand() *cli.Command {
	return &cli.Command{
		Name:  "files",
		Usage: "read, write and manage files inside a sandbox",
		Description: `Paths are inside the sandbox; a relative path is taken from its workdir.
Everything runs as the sandbox's root unless --user names another user, whose
permissions then apply. Directories in and out as trees: boxctl cp.`,
		Subcommands: []*cli.Command{
			filesCatCommand(), filesWriteCommand(), filesLsCommand(), filesStatCommand(),
			filesMkdirCommand(), filesRmCommand(), filesMvCommand(), filesChmodCommand(),
			filesWatchCommand(), filesUploadCommand(), filesDownloadCommand(),
			filesReadCommand(), filesEditCommand(), filesGlobCommand(), filesGrepCommand(), filesChownCommand(),
		},
	}
}

func filesCatCommand() *cli.Command {
	return &cli.Command{
		Name:      "cat",
		Usage:     "print a file (or a byte range of it) to stdout",
		ArgsUsage: "ID PATH",
		Flags: []cli.Flag{
			userFlag,
			&cli.Int64Flag{Name: "offset", Usage: "first byte to print"},
			&cli.Int64Flag{Name: "length", Usage: "bytes to print (default: to the end)"},
			&cli.BoolFlag{Name: "no-follow", Usage: "refuse a symlink instead of reading its target"},
		},
		Action: func(c *cli.Context) error {
			if err := wantArgs(c, 2, "[--offset N] [--length N] ID PATH"); err != nil {
				return err
			}
			stream, err := filesClient(c).ReadFile(c.Context, connect.NewRequest(&boxdv1.ReadFileRequest{
				SandboxId: c.Args().Get(0), Path: c.Args().Get(1), User: c.String("user"),
				Offset: c.Int64("offset"), Length: c.Int64("length"), NoFollow: c.Bool("no-follow"),
			}))
			if err != nil {
				return err
			}
			defer stream.Close()
			for stream.Receive() {
				if _, err := os.Stdout.Write(stream.Msg().Data); err != nil {
					return err
				}
			}
			return stream.Err()
		},
	}
}

func filesWriteCommand() *cli.Command {
	return &cli.Command{
		Name:      "write",
		Usage:     "write stdin to a file, replacing it atomically",
		ArgsUsage: "ID PATH",
		Flags: []cli.Flag{
			userFlag,
			&cli.StringFlag{Name: "mode", Usage: "octal mode, e.g. 0644 (default: 0644 for a new file, the old mode for a replaced one)"},
			&cli.BoolFlag{Name: "parents", Aliases: []string{"p"}, Usage: "create missing parent directories"},
			&cli.BoolFlag{Name: "in-place", Usage: "truncate and write the existing file instead of replacing it (not atomic)"},
			&cli.BoolFlag{Name: "append", Usage: "append to the file"},
			&cli.BoolFlag{Name: "exclusive", Usage: "fail if the file exists"},
		},
		Action: func(c *cli.Context) error {
			if err := wantArgs(c, 2, "[--mode 0644] [--parents] ID PATH < DATA"); err != nil {
				return err
			}
			mode, err := optionalMode(c)
			if err != nil {
				return err
			}
			stream := filesClient(c).WriteFile(c.Context)
			first := &boxdv1.WriteFileRequest{
				SandboxId: c.Args().Get(0), Path: c.Args().Get(1), User: c.String("user"), Mode: mode,
				Parents: c.Bool("parents"), InPlace: c.Bool("in-place"), Append: c.Bool("append"), Exclusive: c.Bool("exclusive"),
			}
			// One buffer, one message: Send marshals before it returns.
			msg, rest := first, &boxdv1.WriteFileRequest{}
			err = sendChunks(os.Stdin, func(b []byte) error {
				msg.Data = b
				err := stream.Send(msg)
				msg = rest
				return err
			})
			if err == nil && msg == first { // empty input still names the file
				err = stream.Send(first)
			}
			if err != nil && !errors.Is(err, io.EOF) {
				stream.CloseAndReceive()
				return err
			}
			// After io.EOF from Send, boxd's own error comes from here.
			_, err = stream.CloseAndReceive()
			return err
		},
	}
}

// modeString renders a FileInfo's type and mode as ls -l does.
func modeString(fi *boxdv1.FileInfo) string {
	m := fs.FileMode(fi.Mode & 0o777)
	if fi.Mode&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if fi.Mode&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if fi.Mode&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	switch fi.Type {
	case boxdv1.FileType_FILE_TYPE_DIRECTORY:
		m |= fs.ModeDir
	case boxdv1.FileType_FILE_TYPE_SYMLINK:
		m |= fs.ModeSymlink
	case boxdv1.FileType_FILE_TYPE_FIFO:
		m |= fs.ModeNamedPipe
	case boxdv1.FileType_FILE_TYPE_SOCKET:
		m |= fs.ModeSocket
	case boxdv1.FileType_FILE_TYPE_CHAR_DEVICE:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case boxdv1.FileType_FILE_TYPE_BLOCK_DEVICE:
		m |= fs.ModeDevice
	}
	return m.String()
}

func fileLine(fi *boxdv1.FileInfo, name string) string {
	mtime := fi.Mtime
	if t, err := time.Parse(time.RFC3339Nano, mtime); err == nil {
		mtime = t.Local().Format("2006-01-02 15:04:05")
	}
	line := fmt.Sprintf("%s\t%d\t%d\t%d\t%s\t%s", modeString(fi), fi.Uid, fi.Gid, fi.Size, mtime, name)
	if fi.LinkTarget != "" {
		line += " -> " + fi.LinkTarget
	}
	if fi.Error != "" {
		line += "  (" + fi.Error + ")"
	}
	return line
}

func filesLsCommand() *cli.Command {
	return &cli.Command{
		Name:      "ls",
		Usage:     "list a directory (symlinks are listed, not entered)",
		ArgsUsage: "ID [PATH]",
		Flags: []cli.Flag{
			userFlag,
			&cli.IntFlag{Name: "depth", Aliases: []string{"d"}, Value: 1, Usage: "levels to list; -1 for all"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() < 1 || c.NArg() > 2 {
				return fmt.Errorf("usage: boxctl files ls [--depth N] [--json] ID [PATH]")
			}
			path := c.Args().Get(1)
			if path == "" {
				path = "."
			}
			stream, err := filesClient(c).ListDir(c.Context, connect.NewRequest(&boxdv1.ListDirRequest{
				SandboxId: c.Args().Get(0), Path: path, User: c.String("user"), Depth: int32(c.Int("depth")),
			}))
			if err != nil {
				return err
			}
			defer stream.Close()
			if c.Bool("json") {
				var all []*boxdv1.FileInfo
				for stream.Receive() {
					all = append(all, stream.Msg().Entries...)
				}
				if err := stream.Err(); err != nil {
					return err
				}
				return printJSONArray(all)
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 1, ' ', tabwriter.AlignRight)
			for stream.Receive() {
				for _, fi := range stream.Msg().Entries {
					fmt.Fprintln(tw, fileLine(fi, fi.Path))
				}
				tw.Flush()
			}
			return stream.Err()
		},
	}
}

func filesStatCommand() *cli.Command {
	return &cli.Command{
		Name:      "stat",
		Usage:     "describe a path (a symlink itself unless --follow)",
		ArgsUsage: "ID PATH",
		Flags: []cli.Flag{
			userFlag,
			&cli.BoolFlag{Name: "follow", Aliases: []string{"L"}, Usage: "describe a symlink's target"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON"},
		},
		Action: func(c *cli.Context) error {
			if err := wantArgs(c, 2, "[--follow] [--json] ID PATH"); err != nil {
				return err
			}
			resp, err := filesClient(c).StatFile(c.Context, connect.NewRequest(&boxdv1.StatFileRequest{
				SandboxId: c.Args().Get(0), Path: c.Args().Get(1), User: c.String("user"), Follow: c.Bool("follow"),
			}))
			if err != nil {
				return err
			}
			if c.Bool("json") {
				return printJSON(resp.Msg.Info)
			}
			return printStat(resp.Msg.Info)
		},
	}
}

// printStat prints fi as `files stat` does without --json.
func printStat(fi *boxdv1.FileInfo) error {
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 1, ' ', 0)
	fmt.Fprintf(tw, "path:\t%s\n", fi.Path)
	fmt.Fprintf(tw, "type:\t%s\n", strings.ToLower(strings.TrimPrefix(fi.Type.String(), "FILE_TYPE_")))
	fmt.Fprintf(tw, "size:\t%d\n", fi.Size)
	fmt.Fprintf(tw, "mode:\t%04o (%s)\n", fi.Mode, modeString(fi))
	fmt.Fprintf(tw, "owner:\t%d:%d\n", fi.Uid, fi.Gid)
	fmt.Fprintf(tw, "mtime:\t%s\n", fi.Mtime)
	if fi.LinkTarget != "" {
		fmt.Fprintf(tw, "target:\t%s\n", fi.LinkTarget)
	}
	return tw.Flush()
}

func filesMkdirCommand() *cli.Command {
	return &cli.Command{
		Name:      "mkdir",
		Usage:     "create a directory",
		ArgsUsage: "ID PATH",
		Flags: []cli.Flag{
			userFlag,
			&cli.BoolFlag{Name: "parents", Aliases: []string{"p"}, Usage: "create missing parents; an existing directory is no error"},
			&cli.StringFlag{Name: "mode", Aliases: []string{"m"}, Usage: "octal mode (default 0755)"},
		},
		Action: func(c *cli.Context) error {
			if err := wantArgs(c, 2, "[-p] [--mode 0755] ID PATH"); err != nil {
				return err
			}
			mode, err := optionalMode(c)
			if err != nil {
				return err
			}
			_, err = filesClient(c).MakeDir(c.Context, connect.NewRequest(&boxdv1.MakeDirRequest{
				SandboxId: c.Args().Get(0), Path: c.Args().Get(1), User: c.String("user"), Mode: mode, Parents: c.Bool("parents"),
			}))
			return err
		},
	}
}

func filesRmCommand() *cli.Command {
	return &cli.Command{
		Name:      "rm",
		Usage:     "remove a file, a symlink or an empty directory; -r for a tree",
		ArgsUsage: "ID PATH",
		Flags: []cli.Flag{
			userFlag,
			&cli.BoolFlag{Name: "recursive", Aliases: []string{"r"}, Usage: "remove a directory and everything in it"},
		},
		Action: func(c *cli.Context) error {
			if err := wantArgs(c, 2, "[-r] ID PATH"); err != nil {
				return err
			}
			_, err := filesClient(c).RemovePath(c.Context, connect.NewRequest(&boxdv1.RemovePathRequest{
				SandboxId: c.Args().Get(0), Path: c.Args().Get(1), User: c.String("user"), Recursive: c.Bool("recursive"),
			}))
			return err
		},
	}
}

func filesMvCommand() *cli.Command {
	return &cli.Command{
		Name:      "mv",
		Usage:     "rename a path (an existing destination file is replaced unless -n)",
		ArgsUsage: "ID SRC DST",
		Flags: []cli.Flag{
			userFlag,
			&cli.BoolFlag{Name: "no-clobber", Aliases: []string{"n"}, Usage: "fail if DST exists"},
		},
		Action: func(c *cli.Context) error {
			if err := wantArgs(c, 3, "[-n] ID SRC DST"); err != nil {
				return err
			}
			_, err := filesClient(c).RenamePath(c.Context, connect.NewRequest(&boxdv1.RenamePathRequest{
				SandboxId: c.Args().Get(0), Src: c.Args().Get(1), Dst: c.Args().Get(2), User: c.String("user"), NoOverwrite: c.Bool("no-clobber"),
			}))
			return err
		},
	}
}

func filesChmodCommand() *cli.Command {
	return &cli.Command{
		Name:      "chmod",
		Usage:     "set a path's mode (a symlink is refused, not followed)",
		ArgsUsage: "ID MODE PATH",
		Flags:     []cli.Flag{userFlag},
		Action: func(c *cli.Context) error {
			if err := wantArgs(c, 3, "ID MODE PATH"); err != nil {
				return err
			}
			mode, err := parseMode(c.Args().Get(1))
			if err != nil {
				return err
			}
			_, err = filesClient(c).ChmodPath(c.Context, connect.NewRequest(&boxdv1.ChmodPathRequest{
				SandboxId: c.Args().Get(0), Path: c.Args().Get(2), User: c.String("user"), Mode: mode,
			}))
			return err
		},
	}
}

func filesWatchCommand() *cli.Command {
	return &cli.Command{
		Name:      "watch",
		Usage:     "print changes under a directory until interrupted",
		ArgsUsage: "ID PATH",
		Flags: []cli.Flag{
			userFlag,
			&cli.BoolFlag{Name: "recursive", Aliases: []string{"r"}, Usage: "watch subdirectories too"},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object per event"},
		},
		Action: func(c *cli.Context) error {
			if err := wantArgs(c, 2, "[-r] [--json] ID PATH"); err != nil {
				return err
			}
			stream, err := filesClient(c).WatchPath(c.Context, connect.NewRequest(&boxdv1.WatchPathRequest{
				SandboxId: c.Args().Get(0), Path: c.Args().Get(1), User: c.String("user"), Recursive: c.Bool("recursive"),
			}))
			if err != nil {
				return err
			}
			defer stream.Close()
			for stream.Receive() {
				m := stream.Msg()
				if m.Ready {
					fmt.Fprintf(os.Stderr, "watching %s\n", c.Args().Get(1))
				}
				for _, ev := range m.Events {
					if c.Bool("json") {
						if err := printJSONLine(ev); err != nil {
							return err
						}
						continue
					}
					op := strings.ToLower(strings.TrimPrefix(ev.Op.String(), "WATCH_OP_"))
					line := op + " " + ev.Path
					if ev.OldPath != "" {
						line = op + " " + ev.OldPath + " -> " + ev.Path
					}
					if ev.IsDir {
						line += "/"
					}
					if ev.Message != "" {
						line += " (" + ev.Message + ")"
					}
					fmt.Println(line)
				}
			}
			return stream.Err()
		},
	}
}
