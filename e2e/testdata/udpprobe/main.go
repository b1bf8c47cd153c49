// Command udpprobe sends one UDP datagram and prints the first reply. The
// egress tests run it in a sandbox to send to broadcast and multicast
// addresses, which busybox's nc cannot (it never sets SO_BROADCAST).
//
//	udpprobe ADDR:PORT MESSAGE
//
// It prints "reply FROM DATA" and exits 0, or prints why not and exits 1
// (no reply within 2 s) or 2 (the kernel refused to send).
package main

import (
	"fmt"
	"net"
	"os"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: udpprobe ADDR:PORT MESSAGE")
		os.Exit(2)
	}
	to, err := net.ResolveUDPAddr("udp4", os.Args[1])
	if err != nil {
		fmt.Println("resolve:", err)
		os.Exit(2)
	}
	c, err := net.ListenUDP("udp4", nil)
	if err != nil {
		fmt.Println("socket:", err)
		os.Exit(2)
	}
	rc, err := c.SyscallConn()
	if err == nil {
		_ = rc.Control(func(fd uintptr) {
			err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_BROADCAST, 1)
		})
	}
	if err != nil {
		fmt.Println("SO_BROADCAST:", err)
		os.Exit(2)
	}
	if _, err := c.WriteToUDP([]byte(os.Args[2]), to); err != nil {
		fmt.Println("send:", err)
		os.Exit(2)
	}
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 1500)
	n, from, err := c.ReadFromUDP(buf)
	if err != nil {
		fmt.Println("no reply:", err)
		os.Exit(1)
	}
	fmt.Printf("reply %s %s\n", from, buf[:n])
}
