package main

import (
	"fmt"
	"os"
	"strings"

	"connectrpc.com/connect"
	"github.com/urfave/cli/v2"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// The agent file helpers: files read, edit, glob, grep and chown.

// helperArgs returns the positional arguments, padded to max, or the
// usage. Flags written after them (boxctl files read ID PATH --offset 3,
// as the helpers' usage reads) flagsFirst has moved before them.
func helperArgs(c *cli.Context, min, max int, usage string) ([]string, error) {
	pos := c.Args().Slice()
	if len(pos) < min || len(pos) > max {
		return nil, fmt.Errorf("usage: boxctl files %s %s", c.Command.Name, usage)
	}
	for len(pos) < max {
		pos = append(pos, "")
	}
	return pos, nil
}

func filesReadCommand() *cli.Command {
	return &cli.Command{
		Name:      "read",
		Usage:     "print lines of a text file, numbered like cat -n",
		ArgsUsage: "ID PATH",
		Flags: []cli.Flag{
			userFlag,
			&cli.Int64Flag{Name: "offset", Usage: "lines to skip: the first line printed is offset+1"},
			&cli.IntFlag{Name: "limit", Usage: "most lines to print (default 2000)"},
			&cli.IntFlag{Name: "max-line-bytes", Usage: "cut longer lines (default 4096)"},
			&cli.BoolFlag{Name: "json", Usage: "print the API's answer as JSON"},
		},
		Action: func(c *cli.Context) error {
			args, err := helperArgs(c, 2, 2, "ID PATH [--offset N] [--limit N]")
			if err != nil {
				return err
			}
			res, err := filesClient(c).ReadLines(c.Context, connect.NewRequest(&boxdv1.ReadLinesRequest{
				SandboxId: args[0], Path: args[1], User: c.String("user"),
				Offset: c.Int64("offset"), Limit: int32(c.Int("limit")), MaxLineBytes: int32(c.Int("max-line-bytes")),
			}))
			if err != nil {
				return err
			}
			m := res.Msg
			if c.Bool("json") {
				b, err := protoJSON.Marshal(m)
				if err != nil {
					return err
				}
				_, err = fmt.Println(string(b))
				return err
			}
			var b strings.Builder
			for _, l := range m.Lines {
				fmt.Fprintf(&b, "%6d\t%s", l.Number, l.Text)
				if l.Cut {
					b.WriteString(" [line cut]")
				}
				b.WriteByte('\n')
			}
			if _, err := os.Stdout.WriteString(b.String()); err != nil {
				return err
			}
			if m.Binary {
				fmt.Fprintf(os.Stderr, "boxctl: %s looks binary (a NUL byte in its first 8 KiB)\n", args[1])
			}
			if m.MoreLines {
				fmt.Fprintf(os.Stderr, "boxctl: more lines follow; read on with --offset %d\n", m.NextOffset)
			}
			return nil
		},
	}
}

func filesEditCommand() *cli.Command {
	return &cli.Command{
		Name:      "edit",
		Usage:     "replace exact text in a file (once, or every occurrence with --all), atomically",
		ArgsUsage: "ID PATH",
		Flags: []cli.Flag{
			userFlag,
			&cli.StringFlag{Name: "old", Usage: "the exact text to replace (required); it must occur once unless --all"},
			&cli.StringFlag{Name: "new", Usage: "the replacement text"},
			&cli.BoolFlag{Name: "all", Usage: "replace every occurrence"},
		},
		Action: func(c *cli.Context) error {
			args, err := helperArgs(c, 2, 2, "ID PATH --old S --new S [--all]")
			if err != nil {
				return err
			}
			if !c.IsSet("old") {
				return fmt.Errorf("--old is required; usage: boxctl files edit ID PATH --old S --new S [--all]")
			}
			res, err := filesClient(c).EditFile(c.Context, connect.NewRequest(&boxdv1.EditFileRequest{
				SandboxId: args[0], Path: args[1], User: c.String("user"),
				OldString: c.String("old"), NewString: c.String("new"), ReplaceAll: c.Bool("all"),
			}))
			if err != nil {
				return err
			}
			fmt.Printf("%s: %d replacement(s), the first at line %d\n", res.Msg.Info.GetPath(), res.Msg.Replacements, res.Msg.Line)
			return nil
		},
	}
}

func filesGlobCommand() *cli.Command {
	return &cli.Command{
		Name:      "glob",
		Usage:     "print the paths matching a pattern ('*', '?', '[...]' in a name, '**' for any directories)",
		ArgsUsage: "ID PATTERN",
		Flags: []cli.Flag{
			userFlag,
			&cli.StringFlag{Name: "path", Usage: "where a relative pattern starts (default: the workdir)"},
			&cli.IntFlag{Name: "limit", Usage: "most paths (default 1000, at most 10000)"},
			&cli.BoolFlag{Name: "json", Usage: "print the matches as JSON"},
		},
		Action: func(c *cli.Context) error {
			args, err := helperArgs(c, 2, 2, "ID PATTERN [--path DIR] [--limit N]")
			if err != nil {
				return err
			}
			res, err := filesClient(c).Glob(c.Context, connect.NewRequest(&boxdv1.GlobRequest{
				SandboxId: args[0], Pattern: args[1], Path: c.String("path"), User: c.String("user"), Limit: int32(c.Int("limit")),
			}))
			if err != nil {
				return err
			}
			if c.Bool("json") {
				if err := printJSONArray(res.Msg.Matches); err != nil {
					return err
				}
			} else {
				var b strings.Builder
				for _, m := range res.Msg.Matches {
					b.WriteString(m.Path)
					if m.Type == boxdv1.FileType_FILE_TYPE_DIRECTORY {
						b.WriteByte('/')
					}
					b.WriteByte('\n')
				}
				if _, err := os.Stdout.WriteString(b.String()); err != nil {
					return err
				}
			}
			if res.Msg.Truncated {
				fmt.Fprintf(os.Stderr, "boxctl: glob truncated: %s\n", res.Msg.TruncatedReason)
			}
			return nil
		},
	}
}

func filesGrepCommand() *cli.Command {
	return &cli.Command{
		Name:      "grep",
		Usage:     "print the lines matching a regular expression (RE2) as PATH:LINE:TEXT; exit 1 if none",
		ArgsUsage: "ID PATTERN [PATH]",
		Flags: []cli.Flag{
			userFlag,
			&cli.StringFlag{Name: "glob", Aliases: []string{"g"}, Usage: "only files whose name (or, with '/', relative path) matches"},
			&cli.BoolFlag{Name: "ignore-case", Aliases: []string{"i"}},
			&cli.BoolFlag{Name: "fixed-strings", Aliases: []string{"F"}, Usage: "PATTERN is plain text"},
			&cli.IntFlag{Name: "limit", Usage: "most matches (default 1000, at most 10000)"},
			&cli.IntFlag{Name: "max-line-bytes", Usage: "cut longer lines (default 4096)"},
			&cli.BoolFlag{Name: "json", Usage: "print the matches as JSON"},
		},
		Action: func(c *cli.Context) error {
			args, err := helperArgs(c, 2, 3, "ID PATTERN [PATH] [--glob G] [-i] [-F]")
			if err != nil {
				return err
			}
			res, err := filesClient(c).Grep(c.Context, connect.NewRequest(&boxdv1.GrepRequest{
				SandboxId: args[0], Pattern: args[1], Path: args[2], Glob: c.String("glob"),
				User: c.String("user"), Limit: int32(c.Int("limit")), IgnoreCase: c.Bool("ignore-case"),
				Literal: c.Bool("fixed-strings"), MaxLineBytes: int32(c.Int("max-line-bytes")),
			}))
			if err != nil {
				// Exit 1 means no match, as for grep: boxd's errors are 125.
				return boxdErr{err}
			}
			if c.Bool("json") {
				if err := printJSONArray(res.Msg.Matches); err != nil {
					return err
				}
			} else {
				var b strings.Builder
				for _, m := range res.Msg.Matches {
					if m.Binary {
						fmt.Fprintf(&b, "Binary file %s matches\n", m.Path)
						continue
					}
					fmt.Fprintf(&b, "%s:%d:%s\n", m.Path, m.Line.GetNumber(), m.Line.GetText())
				}
				if _, err := os.Stdout.WriteString(b.String()); err != nil {
					return err
				}
			}
			if res.Msg.Truncated {
				fmt.Fprintf(os.Stderr, "boxctl: grep truncated: %s\n", res.Msg.TruncatedReason)
			}
			if len(res.Msg.Matches) == 0 {
				return exitError{1}
			}
			return nil
		},
	}
}

func filesChownCommand() *cli.Command {
	return &cli.Command{
		Name:      "chown",
		Usage:     "change a path's owner: USER, USER:GROUP, USER: or :GROUP (a symlink is refused, not followed)",
		ArgsUsage: "ID OWNER PATH",
		Flags: []cli.Flag{
			userFlag,
			&cli.BoolFlag{Name: "recursive", Aliases: []string{"R"}, Usage: "the whole tree (symlinks in it are changed themselves, never followed)"},
		},
		Action: func(c *cli.Context) error {
			args, err := helperArgs(c, 3, 3, "ID USER[:GROUP] PATH [-R]")
			if err != nil {
				return err
			}
			_, err = filesClient(c).ChownPath(c.Context, connect.NewRequest(&boxdv1.ChownPathRequest{
				SandboxId: args[0], Owner: args[1], Path: args[2], User: c.String("user"), Recursive: c.Bool("recursive"),
			}))
			return err
		},
	}
}
