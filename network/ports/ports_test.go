package ports

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/errdefs"
)

func TestNormalize(t *testing.T) {
	allowed := netip.MustParseAddr("192.0.2.7")
	p := Policy{Allowed: []netip.Addr{allowed}}
	for _, tc := range []struct {
		in    Mapping
		field string // "" = ok
		want  Mapping
	}{
		{Mapping{Port: 80}, "", Mapping{HostIP: "127.0.0.1", Port: 80, Protocol: "tcp"}},
		{Mapping{HostIP: "::1", HostPort: 8080, Port: 80}, "", Mapping{HostIP: "::1", HostPort: 8080, Port: 80, Protocol: "tcp"}},
		{Mapping{HostIP: "127.0.0.5", Port: 65535}, "", Mapping{HostIP: "127.0.0.5", Port: 65535, Protocol: "tcp"}},
		{Mapping{HostIP: "::ffff:127.0.0.1", Port: 1}, "", Mapping{HostIP: "127.0.0.1", Port: 1, Protocol: "tcp"}},
		{Mapping{HostIP: "192.0.2.7", Port: 80}, "", Mapping{HostIP: "192.0.2.7", Port: 80, Protocol: "tcp"}},
		{Mapping{HostIP: "192.0.2.8", Port: 80}, "host_ip", Mapping{}},
		{Mapping{HostIP: "0.0.0.0", Port: 80}, "host_ip", Mapping{}},
		{Mapping{HostIP: "::", Port: 80}, "host_ip", Mapping{}},
		{Mapping{HostIP: "localhost", Port: 80}, "host_ip", Mapping{}},
		{Mapping{HostIP: "fe80::1%eth0", Port: 80}, "host_ip", Mapping{}},
		{Mapping{Port: 0}, "port", Mapping{}},
		{Mapping{Port: 65536}, "port", Mapping{}},
		{Mapping{Port: -1}, "port", Mapping{}},
		{Mapping{Port: 80, HostPort: 65536}, "host_port", Mapping{}},
		{Mapping{Port: 80, HostPort: -1}, "host_port", Mapping{}},
		{Mapping{Port: 80, Protocol: "udp"}, "protocol", Mapping{}},
	} {
		got, err := p.Normalize(tc.in)
		var fe *FieldError
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%+v: %v", tc.in, err)
		case tc.field == "" && got != tc.want:
			t.Errorf("%+v: got %+v, want %+v", tc.in, got, tc.want)
		case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field || !errdefs.IsInvalidArgument(err)):
			t.Errorf("%+v: got %v, want an invalid-argument error about %s", tc.in, err, tc.field)
		}
	}
}

func TestBindInUse(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	_, err = Bind(Mapping{HostIP: "127.0.0.1", HostPort: busy.Addr().(*net.TCPAddr).Port, Port: 80, Protocol: "tcp"})
	if !errdefs.IsFailedPrecondition(err) || BindField(err) != "host_port" || !InUse(err) {
		t.Errorf("bind of a port in use: %v (field %q, in use %v), want failed-precondition about host_port", err, BindField(err), InUse(err))
	}
}

// publish serves a loopback port whose connections dial to target (the
// "sandbox"), or fail with dialErr.
func publish(t *testing.T, target string, dialErr error) (*Publisher, string) {
	t.Helper()
	l, err := Bind(Mapping{HostIP: "127.0.0.1", Port: 1, Protocol: "tcp"})
	if err != nil {
		t.Fatal(err)
	}
	p := &Publisher{}
	p.Serve("sb", l, func(ctx context.Context, _ int) (net.Conn, error) {
		if dialErr != nil {
			return nil, dialErr
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", target)
	})
	t.Cleanup(func() { p.Release("sb", nil) })
	return p, l.Mapping().HostAddr()
}

// TestHalfClose: a client that shuts down its sending side still gets the
// answer the server writes after reading to EOF.
func TestHalfClose(t *testing.T) {
	srv, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	go func() {
		c, err := srv.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		n, _ := io.Copy(io.Discard, c)
		fmt.Fprintf(c, "got %d bytes", n)
	}()
	_, addr := publish(t, srv.Addr().String(), nil)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(make([]byte, 3<<20)); err != nil {
		t.Fatal(err)
	}
	c.(*net.TCPConn).CloseWrite()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil || string(b) != fmt.Sprintf("got %d bytes", 3<<20) {
		t.Errorf("answer after half-close: %q, %v", b, err)
	}
}

// TestRefusedIsReset: when the sandbox side cannot be reached, the client
// is reset at once.
func TestRefusedIsReset(t *testing.T) {
	_, addr := publish(t, "", errors.New("connection refused in the sandbox"))
	c, err := net.Dial("tcp", addr)
	if errors.Is(err, syscall.ECONNRESET) {
		return // the reset came before connect returned
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = c.Read(make([]byte, 1))
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("read: %v, want a reset", err)
	}
}

// holdingServer listens on loopback and holds every connection it accepts
// until the test ends.
func holdingServer(t *testing.T) net.Listener {
	t.Helper()
	srv, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	go func() {
		for {
			c, err := srv.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	return srv
}

// TestReleaseEndsEverything: releasing a port closes its listener and the
// connections it carries.
func TestReleaseEndsEverything(t *testing.T) {
	srv := holdingServer(t)
	p, addr := publish(t, srv.Addr().String(), nil)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	time.Sleep(50 * time.Millisecond) // accepted and dialled
	done := make(chan struct{})
	go func() { p.Release("sb", nil); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Release did not return")
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, syscall.ETIMEDOUT) {
		t.Errorf("read on a released port's connection: %v, want EOF or reset", err)
	}
	if c2, err := net.Dial("tcp", addr); err == nil {
		c2.Close()
		t.Error("released port still accepts")
	}
	if got := p.Published("sb"); len(got) != 0 {
		t.Errorf("Published after Release = %v", got)
	}
}

// TestConnLimits: connections beyond the port's, the sandbox's (over all
// its ports) or the daemon's bound are reset at accept, and a slot freed
// is usable again.
func TestConnLimits(t *testing.T) {
	srv := holdingServer(t)
	p := &Publisher{MaxConns: 3, MaxSandboxConns: 5, MaxTotalConns: 7}
	dial := func(ctx context.Context, _ int) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", srv.Addr().String())
	}
	serve := func(id string) string {
		l, err := Bind(Mapping{HostIP: "127.0.0.1", Port: 1, Protocol: "tcp"})
		if err != nil {
			t.Fatal(err)
		}
		p.Serve(id, l, dial)
		return l.Mapping().HostAddr()
	}
	a1, a2, b1, b2 := serve("a"), serve("a"), serve("b"), serve("b")
	t.Cleanup(func() { p.Release("a", nil); p.Release("b", nil) })
	// alive opens n connections to addr and reports how many the
	// publisher carries (not reset within 300 ms).
	var held []net.Conn
	t.Cleanup(func() {
		for _, c := range held {
			c.Close()
		}
	})
	alive := func(addr string, n int) int {
		var cs []net.Conn
		for range n {
			c, err := net.Dial("tcp", addr)
			if err == nil {
				cs = append(cs, c)
			}
			time.Sleep(20 * time.Millisecond) // accepted in order
		}
		got := 0
		for _, c := range cs {
			c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			if _, err := c.Read(make([]byte, 1)); errors.Is(err, os.ErrDeadlineExceeded) {
				got++
				held = append(held, c)
			} else {
				c.Close()
			}
		}
		return got
	}
	if got := alive(a1, 5); got != 3 {
		t.Errorf("port a1 carries %d of 5, want the port's 3", got)
	}
	if got := alive(a2, 5); got != 2 {
		t.Errorf("port a2 carries %d of 5, want the sandbox's remaining 2", got)
	}
	if got := alive(b1, 3); got != 2 {
		t.Errorf("port b1 carries %d of 3, want the daemon's remaining 2", got)
	}
	if got := alive(b2, 1); got != 0 {
		t.Errorf("port b2 carries %d, want 0 (daemon bound reached)", got)
	}
	// Freeing sandbox a's connections frees daemon slots for b.
	p.Release("a", nil)
	time.Sleep(100 * time.Millisecond)
	if got := alive(b2, 4); got != 3 {
		t.Errorf("port b2 carries %d of 4 after a's release, want 3 (b's bound 5, 2 held)", got)
	}
}

// TestGiveUp: what GiveUp records is found by GaveUp, whatever the record-
// only fields, and Forget (also before anything was given up) and Release
// drop it.
func TestGiveUp(t *testing.T) {
	p := &Publisher{}
	m := Mapping{HostIP: "127.0.0.1", HostPort: 8080, Port: 80, Protocol: "tcp"}
	p.Forget("sb", m.Same) // nothing recorded yet
	p.GiveUp("sb", m)
	down := m
	down.Down = DownInUse
	if !p.GaveUp("sb", down) || p.GaveUp("other", m) {
		t.Error("GaveUp does not find what GiveUp recorded, or finds it for another sandbox")
	}
	p.Forget("sb", m.Same)
	if p.GaveUp("sb", m) {
		t.Error("GaveUp after Forget")
	}
	p.GiveUp("sb", m)
	p.Release("sb", nil)
	if p.GaveUp("sb", m) {
		t.Error("GaveUp after Release of all ports")
	}
}
