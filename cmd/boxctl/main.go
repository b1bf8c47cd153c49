//go:build linux

// Command boxctl is the front of boxd's CLI: a small binary that hands every
// command, with the same argv, environment and stdio, to the full CLI
// (boxctl-full, installed next to it; its source is cmd/boxctl/full).
package main

import (
	"os"
	"path/filepath"
	"syscall"
)

// fullName is the full CLI's file name, looked up in boxctl's own directory
// so an install is one directory with both binaries, whatever PATH says.
const fullName = "boxctl-full"

func main() {
	execFull()
}

// execFull replaces this process with the full CLI; it returns only on
// failure, after saying why.
func execFull() {
	self, err := os.Executable()
	if err != nil {
		os.Stderr.WriteString("boxctl: cannot find its own binary: " + err.Error() + "\n")
		os.Exit(1)
	}
	full := filepath.Join(filepath.Dir(self), fullName)
	err = syscall.Exec(full, os.Args, os.Environ())
	os.Stderr.WriteString("boxctl: cannot run " + full + " (install it next to boxctl): " + err.Error() + "\n")
	os.Exit(1)
}
