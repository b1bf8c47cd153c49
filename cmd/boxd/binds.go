//go:build linux

package main

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/boxd-dev/boxd/internal/bindroot"
)

// bindFlags are the host directories callers may bind (create --bind;
// the Docker endpoint's Binds use the same roots).
func bindFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringSliceFlag{Name: "allow-bind", Usage: "host directory beneath which callers may bind directories they can open themselves into their sandboxes (create --bind), mounted so the sandbox's root acts as the caller's uid (repeatable; default: none, binds are refused)"},
	}
}

// parseBindRoots checks --allow-bind: absolute, clean directories other
// than /.
func parseBindRoots(cc *cli.Context) ([]string, error) {
	var out []string
	for _, v := range cc.StringSlice("allow-bind") {
		root, err := bindroot.ParseRoot(v)
		if err != nil {
			return nil, fmt.Errorf("--allow-bind: %w", err)
		}
		out = append(out, root)
	}
	return out, nil
}

// printBindRoots adds --allow-bind to --print-config's output.
func printBindRoots(w io.Writer, cc *cli.Context) {
	fmt.Fprint(w, "allow-bind = [")
	for i, r := range cc.StringSlice("allow-bind") {
		if i > 0 {
			fmt.Fprint(w, ", ")
		}
		fmt.Fprintf(w, "%q", r)
	}
	fmt.Fprintln(w, "]")
}
