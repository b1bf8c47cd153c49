package main

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// Flags after arguments. urfave/cli v2 reads a command's flags only up to
// its first positional argument (Go's flag package stops there) and has no
// option to go on, so `boxctl fork ID -n 2` would leave "-n 2" as
// arguments. Docker's CLI accepts flags anywhere among a command's
// arguments; flagsFirst gives boxctl the same by moving, before urfave/cli
// parses argv, each flag (with its value) that follows the arguments to
// before them. It knows every command's flags, and which take a value, from
// the command tree itself, so a command added later gets it too.
//
// The commands that take a command line stop at it, as docker exec and
// docker run stop at the first argument after the container or image:
// boxctl's flags go before the sandbox id (exec) or the command (run), and
// everything from there on is the command's own, `-la` in
// `boxctl exec ID ls -la` included. The front binary (cmd/boxctl) reads
// exec the same way.

// commandLines are the commands, by path, whose arguments end in a command
// line: their argv is left as written.
var commandLines = map[string]bool{"exec": true, "run": true, "session exec": true}

// flagsFirst returns argv (program name first) with the flags that follow
// the last command's positional arguments moved before those arguments.
// Everything else is left as written: global flags, command names, "--"
// and what follows it (arguments, whatever they look like), and a flag
// the command does not know, which urfave/cli then refuses by name.
func flagsFirst(app *cli.App, argv []string) []string {
	if len(argv) < 2 {
		return argv
	}
	out := append(make([]string, 0, len(argv)+1), argv[0])
	rest := argv[1:]
	flags, cmds := app.Flags, app.Commands
	var cmd *cli.Command
	path := ""
	for {
		// This level's flags (global ones, or a parent command's), up to
		// the next command name.
		i := leadingFlags(flags, rest)
		out, rest = append(out, rest[:i]...), rest[i:]
		if len(rest) == 0 || rest[0] == "--" {
			return append(out, rest...)
		}
		next := findCommand(cmds, rest[0])
		if next == nil {
			break
		}
		cmd, path = next, strings.TrimSpace(path+" "+next.Name)
		out, rest = append(out, rest[0]), rest[1:]
		flags, cmds = cmd.Flags, cmd.Subcommands
		if len(cmds) == 0 {
			break
		}
	}
	if cmd == nil || commandLines[path] {
		return append(out, rest...)
	}
	return append(out, reorderFlags(cmd, rest)...)
}

// reorderFlags splits a command's argv into its flags and its positional
// arguments, and returns the flags first. A "--" keeps its meaning: the
// words after it are arguments, so it is written between the flags and
// all the arguments.
func reorderFlags(cmd *cli.Command, args []string) []string {
	var flags, pos []string
	dashes := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			dashes, pos = true, append(pos, args[i+1:]...)
			i = len(args)
		case !isFlag(a):
			pos = append(pos, a)
		case !strings.Contains(a, "=") && takesValue(cmd, a):
			if i+1 == len(args) {
				// A value flag with no value: written last, with the
				// arguments left out, so urfave/cli refuses it by name
				// ("flag needs an argument") instead of taking an
				// argument as its value.
				return append(flags, a)
			}
			flags = append(flags, a, args[i+1])
			i++
		default:
			flags = append(flags, a)
		}
	}
	if dashes {
		flags = append(flags, "--")
	}
	return append(flags, pos...)
}

// leadingFlags is the number of words at the start of args that are flags
// of flags (with their values), stopping at the first other word or "--".
func leadingFlags(flags []cli.Flag, args []string) int {
	i := 0
	for i < len(args) && args[i] != "--" && isFlag(args[i]) {
		f := lookupFlag(flags, args[i])
		if f != nil && flagTakesValue(f) && !strings.Contains(args[i], "=") {
			i++
		}
		i++
	}
	if i > len(args) {
		return len(args)
	}
	return i
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}

// isFlag reports whether Go's flag package reads a as a flag ("--" aside):
// "-" alone is an argument (stdin, for some commands).
func isFlag(a string) bool { return len(a) >= 2 && a[0] == '-' }

// lookupFlag finds the flag a word names (-n, --name, --name=value); the
// help flag is every command's.
func lookupFlag(flags []cli.Flag, word string) cli.Flag {
	name, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(word, "-"), "-"), "=")
	for _, f := range append(flags, cli.HelpFlag) {
		for _, n := range f.Names() {
			if n == name {
				return f
			}
		}
	}
	return nil
}

// takesValue reports whether the flag word names takes the next word as its
// value. An unknown flag takes none: it is moved alone and refused.
func takesValue(cmd *cli.Command, word string) bool {
	f := lookupFlag(cmd.Flags, word)
	return f != nil && flagTakesValue(f)
}

func flagTakesValue(f cli.Flag) bool {
	v, ok := f.(cli.DocGenerationFlag)
	return ok && v.TakesValue()
}
