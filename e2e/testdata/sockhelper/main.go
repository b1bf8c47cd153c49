// Command sockhelper is what hostile root in a sandbox runs to take over
// boxd's channel to the init: it puts a listener of its own at a path and
// counts the connections it gets. The e2e tests build it statically and
// copy it into a sandbox.
//
//	sockhelper listen PATH COUNTFILE
//
// removes whatever is at PATH, listens there, prints "listening" and
// writes the number of connections accepted so far to COUNTFILE.
package main

import (
	"fmt"
	"net"
	"os"
	"strconv"
)

func main() {
	if len(os.Args) != 4 || os.Args[1] != "listen" {
		fmt.Fprintln(os.Stderr, "usage: sockhelper listen PATH COUNTFILE")
		os.Exit(2)
	}
	path, countFile := os.Args[2], os.Args[3]
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		fmt.Fprintln(os.Stderr, err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := os.WriteFile(countFile, []byte("0"), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("listening")
	for n := 1; ; n++ {
		c, err := ln.Accept()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		c.Close()
		os.WriteFile(countFile, []byte(strconv.Itoa(n)), 0o644)
	}
}
