package rpc

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/boxd-dev/boxd/rpc/apiwire"
)

func TestListen(t *testing.T) {
	base := t.TempDir()
	// A directory Listen creates is 0750; the socket is 0660.
	path := filepath.Join(base, "new", "boxd.sock")
	ln, err := Listen(path, -1)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(filepath.Dir(path)); st.Mode().Perm() != 0o750 {
		t.Errorf("created dir mode %o, want 750", st.Mode().Perm())
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o660 {
		t.Errorf("socket mode %o, want 660", st.Mode().Perm())
	}
	// A second daemon on a live socket is refused.
	if _, err := Listen(path, -1); err == nil {
		t.Error("Listen on a live socket succeeded")
	}
	ln.Close()

	// An existing directory keeps its mode (it may be /tmp).
	shared := filepath.Join(base, "shared")
	if err := os.Mkdir(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(shared, 0o777|os.ModeSticky)
	ln, err = Listen(filepath.Join(shared, "b.sock"), -1)
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	if st, _ := os.Stat(shared); st.Mode().Perm() != 0o777 || st.Mode()&os.ModeSticky == 0 {
		t.Errorf("existing dir mode changed to %v", st.Mode())
	}

	// A stale socket file from a dead daemon is replaced.
	stale := filepath.Join(base, "stale.sock")
	l, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	ln, err = Listen(stale, -1)
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	ln.Close()
}

// Every accepted connection gets the socket buffers file data needs and the
// caller's credentials, also on a listener boxd did not make itself (one
// passed by systemd).
func TestConnContext(t *testing.T) {
	// As systemd would pass the socket, and behind the connection cap as
	// boxd serves it: both must see the socket itself.
	for _, tc := range []struct {
		name string
		wrap func(net.Listener) net.Listener
	}{
		{"plain listener", func(ln net.Listener) net.Listener { return ln }},
		{"connection cap", func(ln net.Listener) net.Listener { return newLimitListener(ln, 8, slog.Default()) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.sock")
			ul, err := net.Listen("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			ln := tc.wrap(ul)
			defer ln.Close()
			cc, err := net.Dial("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			defer cc.Close()
			c, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx := connContext(context.Background(), c)

			// The kernel caps the request at net.core.wmem_max and reports double.
			want := apiwire.SocketBufferBytes
			if b, err := os.ReadFile("/proc/sys/net/core/wmem_max"); err == nil {
				if max, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
					want = min(want, max)
				}
			}
			sock := c
			if w, ok := c.(interface{ NetConn() net.Conn }); ok {
				sock = w.NetConn()
			}
			raw, err := sock.(*net.UnixConn).SyscallConn()
			if err != nil {
				t.Fatal(err)
			}
			var got int
			raw.Control(func(fd uintptr) { got, err = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF) })
			if err != nil || got < 2*want {
				t.Errorf("SO_SNDBUF = %d (%v), want at least %d", got, err, 2*want)
			}
			p, ok := ctx.Value(peerKey{}).(Peer)
			if !ok || int(p.PID) != os.Getpid() || int(p.UID) != os.Getuid() {
				t.Errorf("peer = %+v, %v; want this process", p, ok)
			}
		})
	}
}
