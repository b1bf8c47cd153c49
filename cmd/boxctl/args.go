//go:build linux

package main

import (
	"strings"
	"unicode/utf8"

	"github.com/boxd-dev/boxd/internal/instance"
	"github.com/boxd-dev/boxd/rpc/lite"
)

// defaultSocket is apiwire.DefaultSocket (a test keeps them equal; the
// front does not link that package).
const defaultSocket = "/run/boxd/boxd.sock"

// invocation is an exec the fast path serves.
type invocation struct {
	socket string
	req    lite.ExecRequest
}

// parseExec reads argv (without the program name) as the full CLI
// (urfave/cli over Go's flag package) reads
//
//	boxctl [--socket PATH] [--instance NAME] exec [--timeout D] [-e K=V]... [-w DIR] ID [--] CMD [ARG...]
//
// and returns the invocation, or why the fast path cannot serve it: any
// other command or flag (-i, -t, -d, -u, --help, ...), a usage error, or a
// value the full CLI would rewrite or refuse, and `exec help ...`. Those go to the full CLI,
// which does what it always did.
//
// exec's flags end at the sandbox id, as docker exec's end at the
// container: the words after it are the command's, `ls -la` and even
// `--timeout 5s` alike. The full CLI reads exec the same way (its
// flagsFirst, which lets other commands take flags after their
// arguments, leaves exec's argv as written).
func parseExec(argv []string, getenv func(string) (string, bool)) (*invocation, string) {
	inv := &invocation{}
	// A host (--host, a global flag, or BOXD_HOST) means a TCP listener,
	// which only the full CLI speaks: the exec must not run on the local
	// socket instead.
	if h, ok := getenv("BOXD_HOST"); ok && h != "" {
		return nil, "BOXD_HOST is set"
	}
	socketSet, instanceSet := false, false
	var inst string
	i := 0
	// Global flags, up to the command name.
	for ; i < len(argv); i++ {
		a := argv[i]
		if !isFlag(a) {
			break
		}
		name, value, next, ok := flagValue(argv, i)
		switch {
		case ok && name == "socket":
			inv.socket, socketSet = value, true
		case ok && name == "instance":
			inst, instanceSet = value, true
		default:
			return nil, "global flag " + a
		}
		i = next
	}
	if i == len(argv) || argv[i] != "exec" {
		return nil, "not an exec"
	}
	i++
	if why := socketOf(inv, socketSet, instanceSet, inst, getenv); why != "" {
		return nil, why
	}
	// exec's flags, up to the first argument or "--".
	var long, short [2]bool // forms used of env (-e) and workdir (-w)
	for ; i < len(argv); i++ {
		a := argv[i]
		if a == "--" {
			i++
			break
		}
		if !isFlag(a) {
			break
		}
		name, value, next, ok := flagValue(argv, i)
		if !ok {
			return nil, "exec flag " + a
		}
		switch name {
		case "timeout":
			inv.req.Timeout = value
		case "env", "e":
			// StringSliceFlag splits on commas and trims spaces; such
			// values are left to the full CLI.
			if value == "" || strings.Contains(value, ",") || strings.TrimSpace(value) != value || strings.HasPrefix(value, "sl:::") {
				return nil, "env value " + value
			}
			inv.req.Env = append(inv.req.Env, value)
			long[0], short[0] = long[0] || name == "env", short[0] || name == "e"
		case "workdir", "w":
			inv.req.Workdir = value
			long[1], short[1] = long[1] || name == "workdir", short[1] || name == "w"
		default:
			return nil, "exec flag " + a
		}
		i = next
	}
	if long[0] && short[0] || long[1] && short[1] {
		return nil, "two forms of one flag" // the full CLI refuses that
	}
	args := argv[i:]
	if len(args) < 2 {
		return nil, "usage"
	}
	if args[0] == "help" || args[0] == "h" {
		return nil, "help" // urfave/cli's help subcommand of exec
	}
	inv.req.SandboxID, inv.req.Args = args[0], args[1:]
	if inv.req.Args[0] == "--" {
		inv.req.Args = inv.req.Args[1:]
	}
	if len(inv.req.Args) == 0 {
		return nil, "usage: no command"
	}
	// protobuf refuses strings that are not UTF-8; the full CLI says how.
	for _, s := range [][]string{{inv.req.SandboxID, inv.req.Workdir, inv.req.Timeout}, inv.req.Args, inv.req.Env} {
		for _, v := range s {
			if !utf8.ValidString(v) {
				return nil, "invalid UTF-8"
			}
		}
	}
	return inv, ""
}

// socketOf sets inv.socket as the full CLI chooses it: --socket or
// BOXD_SOCKET (urfave/cli takes the variable when it is set, even empty),
// else --instance or BOXD_INSTANCE's socket, else the default's.
func socketOf(inv *invocation, socketSet, instanceSet bool, inst string, getenv func(string) (string, bool)) string {
	if !socketSet {
		var ok bool
		if inv.socket, ok = getenv("BOXD_SOCKET"); !ok {
			if !instanceSet {
				inst, instanceSet = getenv("BOXD_INSTANCE")
			}
			inv.socket = defaultSocket
			if instanceSet {
				if inv.socket = instance.Socket(inst); inv.socket == "" {
					return "instance name " + inst // the full CLI says what is wrong
				}
			}
		}
	}
	if inv.socket == "" {
		return "empty socket path"
	}
	return ""
}

// isFlag reports whether Go's flag package takes a as a flag ("--" aside).
func isFlag(a string) bool { return len(a) >= 2 && a[0] == '-' }

// flagValue reads the string flag at argv[i] as Go's flag package does:
// -name or --name, with =value or the next argument as its value. It
// returns the index of the flag's last argument.
func flagValue(argv []string, i int) (name, value string, last int, ok bool) {
	name = argv[i][1:]
	if name[0] == '-' {
		name = name[1:]
	}
	if name == "" || name[0] == '-' || name[0] == '=' {
		return "", "", 0, false
	}
	if n, v, found := strings.Cut(name, "="); found {
		return n, v, i, true
	}
	if i+1 >= len(argv) {
		return "", "", 0, false
	}
	return name, argv[i+1], i + 1, true
}
