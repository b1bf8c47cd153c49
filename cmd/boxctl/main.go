//go:build linux

// Command boxctl is the front of boxd's CLI. Starting the full CLI costs
// ~20 ms (a 19 MB binary and the initialisation of protobuf, connect,
// net/http and urfave/cli), more than boxd needs to run a command, so this
// small binary serves the common `boxctl exec ID -- CMD` itself through
// rpc/lite, and hands everything else, with the same argv, environment and
// stdio, to the full CLI: boxctl-full, installed next to it, source
// cmd/boxctl-full. Whatever it does not understand exactly goes to the full
// CLI too, so boxctl behaves as the full CLI does, only faster.
//
// It links neither os nor time: their initialisation alone (os imports
// time, which sets up internal/godebug) costs ~0.4 ms of a ~5 ms start.
// syscall does the little it needs; out.go writes output as os.File does.
package main

import (
	"syscall"
	_ "unsafe" // for go:linkname

	"github.com/boxd-dev/boxd/rpc/lite"
)

// runtimeArgs is what os.Args is made from: the runtime provides it to os by
// this name, and without os it is the one way to the command line.
//
//go:linkname runtimeArgs os.runtime_args
func runtimeArgs() []string

// runtimeEnv is the environment as the process got it, what syscall.Environ
// and Getenv are made from; those build a map of it first, which costs more
// than boxctl's whole parse.
//
//go:linkname runtimeEnv syscall.runtime_envs
func runtimeEnv() []string

// fullName is the full CLI's file name, looked up in boxctl's own directory
// so an install is one directory with both binaries, whatever PATH says.
const fullName = "boxctl-full"

// noFullEnv, when set to 1, makes the front fail instead of handing a
// command to the full CLI: tests use it to prove the fast path served one.
const noFullEnv = "BOXCTL_NO_FULL"

// exitBoxdError is the full CLI's exit code when boxd refused or failed an
// exec (its ExitBoxdError).
const exitBoxdError = 125

var (
	stdout = &fdWriter{fd: 1, name: "/dev/stdout"}
	stderr = &fdWriter{fd: 2, name: "/dev/stderr"}
)

func main() {
	args, env := runtimeArgs(), runtimeEnv()
	inv, why := parseExec(args[1:], func(k string) (string, bool) { return getenv(env, k) })
	if why != "" {
		execFull(args, env, why)
	}
	syscall.Exit(runExec(args, env, inv))
}

// runExec serves an exec as the full CLI's non-interactive exec does and
// returns the exit code.
func runExec(args, env []string, inv *invocation) int {
	conn, err := lite.Dial(inv.socket)
	if err != nil {
		// The full CLI says what is wrong with the daemon in its words.
		execFull(args, env, err.Error())
	}
	res, err := conn.ExecStream(&inv.req, stdout, stderr)
	conn.Close()
	if err != nil {
		switch err.(type) {
		case *lite.NotServedError:
			execFull(args, env, err.Error()) // nothing ran: the full CLI tries its way
		case *lite.Error:
			stderr.WriteString("boxctl: " + err.Error() + "\n")
			return exitBoxdError
		}
		stderr.WriteString("boxctl: " + err.Error() + "\n") // writing stdout failed
		return 1
	}
	if res == nil {
		stderr.WriteString("boxctl: exec: boxd ended the stream without a result\n")
		return exitBoxdError
	}
	// The same notices as the full CLI's exitWith, in the same order.
	if res.TimedOut {
		stderr.WriteString("boxctl: command timed out and was killed\n")
	}
	if res.OOMKilled {
		stderr.WriteString("boxctl: command was killed: the sandbox ran out of memory (oom_killed)\n")
	}
	if res.Truncated {
		stderr.WriteString("boxctl: output truncated (the output limit, or output still unread when the command's pipes were closed)\n")
	}
	return int(res.ExitCode)
}

// execFull replaces this process with the full CLI; it returns only on
// failure, after saying why.
func execFull(args, env []string, why string) {
	if v, _ := getenv(env, noFullEnv); v == "1" {
		stderr.WriteString("boxctl: " + noFullEnv + "=1 and the fast path cannot serve this: " + why + "\n")
		syscall.Exit(exitBoxdError)
	}
	full, err := fullPath()
	if err == nil {
		err = syscall.Exec(full, args, env)
	}
	stderr.WriteString("boxctl: cannot run " + full + " (install it next to boxctl): " + err.Error() + "\n")
	syscall.Exit(1)
}

// fullPath is boxctl-full's path: in the directory of the running binary,
// symbolic links resolved, as os.Executable finds it.
func fullPath() (string, error) {
	buf := make([]byte, 4096)
	n, err := syscall.Readlink("/proc/self/exe", buf)
	if err != nil {
		return fullName, err
	}
	self := string(buf[:n])
	for i := len(self) - 1; i >= 0; i-- {
		if self[i] == '/' {
			return self[:i+1] + fullName, nil
		}
	}
	return fullName, nil
}

// getenv looks key up in env as syscall.Getenv does: the first entry wins.
func getenv(env []string, key string) (string, bool) {
	for _, kv := range env {
		if len(kv) > len(key) && kv[len(key)] == '=' && kv[:len(key)] == key {
			return kv[len(key)+1:], true
		}
	}
	return "", false
}
