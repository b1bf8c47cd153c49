//go:build linux

package runtime

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/containerd/errdefs"

	"github.com/boxd-dev/boxd/network/ports"
)

// TestMayListen: a host port below the unprivileged start is refused to a
// non-admin (permission denied, naming the field and the port) and marked
// as an admin's otherwise; port 0 and unprivileged ports pass.
func TestMayListen(t *testing.T) {
	start := ports.UnprivilegedPortStart()
	if start < 2 {
		t.Fatalf("net.ipv4.ip_unprivileged_port_start is %d on this host: no privileged port to check", start)
	}
	user := WithCaller(context.Background(), Caller{UID: 1000})
	admin := WithCaller(context.Background(), Caller{UID: 1000, Admin: true})
	low := PortSpec{HostIP: "127.0.0.1", HostPort: start - 1, Port: 80, Protocol: "tcp"}
	_, err := mayListen(user, "publish[2].", low)
	if !errdefs.IsPermissionDenied(err) || !strings.Contains(err.Error(), "publish[2].host_port") || !strings.Contains(err.Error(), strconv.Itoa(start-1)) {
		t.Errorf("non-admin, port %d: %v; want permission denied naming publish[2].host_port and the port", start-1, err)
	}
	for name, c := range map[string]context.Context{"admin": admin, "boxd itself": context.Background()} {
		got, err := mayListen(c, "", low)
		if err != nil || !got.Admin {
			t.Errorf("%s, port %d: %+v, %v; want allowed and marked", name, start-1, got, err)
		}
	}
	for _, p := range []int{0, start} {
		s := low
		s.HostPort, s.Admin = p, true
		got, err := mayListen(user, "", s)
		if err != nil || got.Admin {
			t.Errorf("non-admin, port %d: %+v, %v; want allowed, not marked", p, got, err)
		}
	}
}
