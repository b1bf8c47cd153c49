// Command connflood is what the connection-bound tests run: inside a
// sandbox it floods boxd's resolver, and it holds a sandbox server's end
// of published connections. The e2e tests build it statically and copy it
// into a sandbox.
//
//	connflood dns ADDR N SECONDS
//
// opens N TCP connections to the DNS server at ADDR, sends a query on
// each and keeps every connection that answers alive with a query every
// 2 s for SECONDS. It prints "opened K" once all N were tried, then
// "held H" at the end (connections still answering).
//
//	connflood rate ADDR N
//
// sends N UDP queries to ADDR one after the other and prints how many got
// each answer code, e.g. "NXDOMAIN 200 REFUSED 800 none 0".
//
//	connflood spray NET N
//
// sends one UDP datagram to each of N destinations, as fast as it can:
// the addresses NET.2 to NET.201 (NET is three octets, "198.18.1"), each
// on its own port from 1000 up; prints "sent N".
//
//	connflood ask ADDR NAME
//
// asks the DNS server at ADDR over UDP for NAME's A records once (NAME in
// presentation form: \DDD is any byte) and prints the answer code.
//
//	connflood serve PORT...
//
// listens on 127.0.0.1:PORT for each PORT, accepts every connection and
// holds it open without reading; prints "listening".
package main

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/miekg/dns"
)

func main() {
	if len(os.Args) < 3 {
		usage()
	}
	switch os.Args[1] {
	case "dns":
		if len(os.Args) != 5 {
			usage()
		}
		n, _ := strconv.Atoi(os.Args[3])
		secs, _ := strconv.Atoi(os.Args[4])
		floodTCP(os.Args[2], n, time.Duration(secs)*time.Second)
	case "rate":
		n, _ := strconv.Atoi(os.Args[3])
		rate(os.Args[2], n)
	case "serve":
		serve(os.Args[2:])
	case "ask":
		ask1(os.Args[2], os.Args[3])
	case "spray":
		n, _ := strconv.Atoi(os.Args[3])
		spray(os.Args[2], n)
	default:
		usage()
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: connflood dns ADDR N SECONDS | rate ADDR N | ask ADDR NAME | spray NET N | serve PORT...")
	os.Exit(2)
}

func ask1(addr, name string) {
	q := new(dns.Msg)
	q.SetQuestion(name, dns.TypeA)
	r, err := dns.Exchange(q, addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(dns.RcodeToString[r.Rcode])
}

func spray(nw string, n int) {
	c, err := net.ListenPacket("udp4", ":0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for i := range n {
		to, _ := net.ResolveUDPAddr("udp4", fmt.Sprintf("%s.%d:%d", nw, 2+i%200, 1000+i%60000))
		_, _ = c.WriteTo([]byte("x"), to)
	}
	fmt.Println("sent", n)
}

func query() *dns.Msg {
	q := new(dns.Msg)
	q.SetQuestion("flood.invalid.", dns.TypeA)
	return q
}

// ask sends one query on c and reads its answer.
func ask(c *dns.Conn) bool {
	c.SetDeadline(time.Now().Add(3 * time.Second))
	if err := c.WriteMsg(query()); err != nil {
		return false
	}
	_, err := c.ReadMsg()
	return err == nil
}

func floodTCP(addr string, n int, hold time.Duration) {
	var live []*dns.Conn
	for range n {
		nc, err := net.DialTimeout("tcp", addr, 3*time.Second)
		if err != nil {
			continue
		}
		c := &dns.Conn{Conn: nc}
		if ask(c) {
			live = append(live, c)
		} else {
			c.Close()
		}
	}
	fmt.Printf("opened %d\n", len(live))
	end := time.Now().Add(hold)
	for time.Now().Before(end) {
		time.Sleep(2 * time.Second)
		kept := live[:0]
		for _, c := range live {
			if ask(c) {
				kept = append(kept, c)
			} else {
				c.Close()
			}
		}
		live = kept
	}
	fmt.Printf("held %d\n", len(live))
}

func rate(addr string, n int) {
	counts := map[string]int{}
	c := &dns.Client{Net: "udp", Timeout: time.Second}
	for range n {
		r, _, err := c.Exchange(query(), addr)
		if err != nil {
			counts["none"]++
			continue
		}
		counts[dns.RcodeToString[r.Rcode]]++
	}
	fmt.Printf("NXDOMAIN %d REFUSED %d none %d\n", counts["NXDOMAIN"], counts["REFUSED"], counts["none"])
}

func serve(ports []string) {
	var held []net.Conn
	accepted := make(chan net.Conn)
	for _, p := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:"+p)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					time.Sleep(10 * time.Millisecond) // out of descriptors
					continue
				}
				accepted <- c
			}
		}()
	}
	fmt.Println("listening")
	for c := range accepted {
		held = append(held, c)
	}
}
