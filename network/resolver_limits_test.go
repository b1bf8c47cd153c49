package network

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"
)

// TestDNSLimitsQueries: a source gets its burst, then DNSQueriesPerSecond;
// another source is not affected; queries in flight are bounded.
func TestDNSLimitsQueries(t *testing.T) {
	l := newDNSLimits()
	now := time.Unix(1000, 0)
	l.now = func() time.Time { return now }
	a, b := netip.MustParseAddr("10.213.0.2"), netip.MustParseAddr("10.213.0.3")
	ok := 0
	for range 1000 {
		if l.startQuery(a) {
			ok++
			l.endQuery(a)
		}
	}
	if ok != DNSQueriesPerSecond {
		t.Errorf("burst: %d of 1000 admitted, want %d", ok, DNSQueriesPerSecond)
	}
	if !l.startQuery(b) {
		t.Error("another source refused while the first is over its rate")
	}
	l.endQuery(b)
	now = now.Add(100 * time.Millisecond)
	ok = 0
	for range 1000 {
		if l.startQuery(a) {
			ok++
			l.endQuery(a)
		}
	}
	if want := DNSQueriesPerSecond / 10; ok != want {
		t.Errorf("after 100 ms: %d admitted, want %d", ok, want)
	}
	// In flight: never ended.
	now = now.Add(time.Hour)
	ok = 0
	for range 100 {
		if l.startQuery(b) {
			ok++
		}
	}
	if ok != DNSMaxInFlightPerSandbox {
		t.Errorf("in flight: %d admitted, want %d", ok, DNSMaxInFlightPerSandbox)
	}
}

// TestDNSLimitedListener: TCP connections over the per-source bound are
// reset at accept; closing one frees its slot; the total bound holds too.
func TestDNSLimitedListener(t *testing.T) {
	raw, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lim := newDNSLimits()
	lim.perSrcConns, lim.totalConns = 5, 8
	ln := &limitedListener{Listener: raw, lim: lim}
	defer ln.Close()
	accepted := make(chan net.Conn, 100)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	// alive dials n connections from src and counts those not reset.
	alive := func(src string, n int) []net.Conn {
		var live []net.Conn
		for range n {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
			c, err := d.Dial("tcp4", raw.Addr().String())
			if err != nil {
				continue
			}
			time.Sleep(10 * time.Millisecond)
			c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			if _, err := c.Read(make([]byte, 1)); errors.Is(err, os.ErrDeadlineExceeded) {
				live = append(live, c)
			} else {
				c.Close()
			}
		}
		return live
	}
	a := alive("127.0.0.1", 8)
	if len(a) != 5 {
		t.Errorf("source a: %d of 8 alive, want 5", len(a))
	}
	b := alive("127.0.0.2", 8)
	if len(b) != 3 {
		t.Errorf("source b: %d of 8 alive, want the total's remaining 3", len(b))
	}
	// The server closes one of a's: a slot is free again.
	(<-accepted).Close()
	if got := alive("127.0.0.2", 2); len(got) != 1 {
		t.Errorf("after a close: %d of 2 alive, want 1", len(got))
	}
}
