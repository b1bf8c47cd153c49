package main

import (
	"fmt"

	"connectrpc.com/connect"
	"github.com/urfave/cli/v2"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// limitFlags reads --memory, --cpus and --pids. The API's Limits cannot
// tell 0 from unset (0 is the default: the daemon's for create, the
// source's for fork, unchanged for update), so a --cpus 0 or --pids 0 the
// user typed, which would silently mean the default, is refused here.
func limitFlags(c *cli.Context) (*boxdv1.Limits, error) {
	for _, f := range []struct {
		name, what string
		zero       bool
	}{
		{"cpus", "a CPU quota in cores", c.Float64("cpus") == 0},
		{"pids", "a number of processes", c.Int64("pids") == 0},
	} {
		if f.zero && c.IsSet(f.name) {
			return nil, connect.NewError(connect.CodeInvalidArgument,
				fmt.Errorf("--%s 0: want %s above 0 (omit --%s for the default)", f.name, f.what, f.name))
		}
	}
	return &boxdv1.Limits{Memory: c.String("memory"), Cpus: c.Float64("cpus"), Pids: c.Int64("pids")}, nil
}
