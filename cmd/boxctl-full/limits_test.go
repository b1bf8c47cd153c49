package main

import (
	"path/filepath"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/urfave/cli/v2"
)

// TestZeroLimitFlagsRefused: --cpus 0 and --pids 0, which the API would
// read as "the default", are invalid_argument naming the flag, before any
// call (the socket does not exist); omitted, the call goes out.
func TestZeroLimitFlagsRefused(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	run := func(args ...string) error {
		app := &cli.App{Flags: []cli.Flag{&cli.StringFlag{Name: "socket"}}, Commands: commands()}
		return app.Run(append([]string{"boxctl", "--socket", sock}, args...))
	}
	for _, args := range [][]string{
		{"create", "--cpus", "0"}, {"create", "--pids=0"}, {"create", "--cpus", "0.0", "--pids", "32"},
		{"run", "--pids", "0", "true"}, {"update", "--cpus", "0", "ID"}, {"fork", "--pids", "0", "ID"},
	} {
		err := run(args...)
		flag := "--cpus 0"
		if strings.Contains(strings.Join(args, " "), "pids") && !strings.Contains(strings.Join(args, " "), "cpus") {
			flag = "--pids 0"
		}
		if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.HasPrefix(describe(err), "invalid_argument: "+flag) {
			t.Errorf("%q: %v, want invalid_argument: %s", args, err, flag)
		}
	}
	for _, args := range [][]string{{"create"}, {"create", "--cpus", "0.5", "--pids", "32"}, {"update", "--memory", "64m", "ID"}} {
		if err := run(args...); connect.CodeOf(err) != connect.CodeUnavailable {
			t.Errorf("%q: %v, want the call to go out (unavailable: no daemon)", args, err)
		}
	}
}
