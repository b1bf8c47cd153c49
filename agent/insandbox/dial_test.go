//go:build linux

package insandbox

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/containerd/errdefs"
)

// TestDial: the dial op joins boxd's connection to a loopback port as raw
// bytes both ways, half-close included; a port nothing listens on and a
// port out of range are errors.
func TestDial(t *testing.T) {
	tg := startServer(t)
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
		c.Write([]byte("banner\n")) // the server speaks first
		io.Copy(c, c)               // then echoes until EOF
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := tg.client.Dial(ctx, srv.Addr().(*net.TCPAddr).Port)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	c.CloseWrite()
	b, err := io.ReadAll(c)
	if err != nil || string(b) != "banner\nping" {
		t.Errorf("through dial: %q, %v; want the banner, the echo and EOF", b, err)
	}

	free, _ := net.Listen("tcp", "127.0.0.1:0")
	port := free.Addr().(*net.TCPAddr).Port
	free.Close()
	if _, err := tg.client.Dial(ctx, port); err == nil {
		t.Error("dial of a port nothing listens on succeeded")
	}
	if _, err := tg.client.Dial(ctx, 70000); !errdefs.IsInvalidArgument(err) {
		t.Errorf("dial of port 70000: %v, want invalid argument", err)
	}
}
