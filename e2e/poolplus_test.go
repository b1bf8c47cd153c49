//go:build linux

package e2e

import (
	"fmt"
	"net"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/boxd-dev/boxd/internal/rpcclient"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// TestPoolAdoptionHostnamePorts: a create with a hostname and a published
// port is served by a pool member and gives what a cold create of the same
// request gives: the same inspect (the hostname, the port's mapping), the
// hostname in the kernel and in the environment, the port served; after a
// SIGKILLed boxd starts again, both are inspected alike and their ports
// served again.
func TestPoolAdoptionHostnamePorts(t *testing.T) {
	sock, dir, kill, c := poolDaemon(t, namespace+"-poolhp", "--warm-pool", "1")
	api := rpcclient.New(sock)
	members := waitPool(t, c, 1, dir)
	req := func(name string, cold bool) *boxdv1.CreateSandboxRequest {
		return &boxdv1.CreateSandboxRequest{
			Name: name, Hostname: "web-" + name, Cold: cold, Env: []string{"A=1"},
			Publish: []*boxdv1.PublishedPort{{Port: 8080}},
		}
	}
	got := createPooledAndCold(t, c, api, members, req)
	for _, sb := range got {
		if want := "web-" + sb.Name; sb.Hostname != want {
			t.Errorf("%s: inspect hostname %q, want %q", sb.Name, sb.Hostname, want)
		}
		if len(sb.Ports) != 1 || sb.Ports[0].HostPort == 0 || sb.Ports[0].Port != 8080 {
			t.Fatalf("%s: ports %v", sb.Name, sb.Ports)
		}
		out, stderr, code := boxctlAt(sock, "exec", sb.Id, "--", "sh", "-c", "hostname; echo $HOSTNAME; cat /proc/sys/kernel/hostname")
		want := strings.Repeat("web-"+sb.Name+"\n", 3)
		if code != 0 || out != want {
			t.Errorf("%s: inside: exit %d %q %s, want %q", sb.Name, code, out, stderr, want)
		}
	}
	served := func(when string) {
		t.Helper()
		for _, sb := range got {
			dir := "/workspace/www"
			if out, stderr, code := boxctlAt(sock, "exec", sb.Id, "--", "sh", "-c", fmt.Sprintf("mkdir -p %s && printf %s > %s/index.html", dir, sb.Name, dir)); code != 0 {
				t.Fatalf("%s: prepare www: %s %s", sb.Name, out, stderr)
			}
			if _, stderr, code := boxctlAt(sock, "exec", "-d", sb.Id, "--", "busybox", "httpd", "-f", "-p", "127.0.0.1:8080", "-h", dir); code != 0 {
				t.Fatalf("%s: httpd: %s", sb.Name, stderr)
			}
			addr := net.JoinHostPort("127.0.0.1", fmt.Sprint(sb.Ports[0].HostPort))
			if body := get(t, addr); body != sb.Name {
				t.Errorf("%s %s: GET %s = %q", when, sb.Name, addr, body)
			}
		}
	}
	served("after create")
	kill()
	var again []*boxdv1.Sandbox
	for _, name := range []string{"pooled", "cold"} {
		g, err := api.GetSandbox(c, connect.NewRequest(&boxdv1.GetSandboxRequest{Id: name}))
		if err != nil {
			t.Fatal(err)
		}
		again = append(again, g.Msg.Sandbox)
		if g.Msg.Sandbox.Hostname != "web-"+name || len(g.Msg.Sandbox.Ports) != 1 || g.Msg.Sandbox.Ports[0].HostPort != got[len(again)-1].Ports[0].HostPort {
			t.Errorf("%s after a restart: hostname %q ports %v", name, g.Msg.Sandbox.Hostname, g.Msg.Sandbox.Ports)
		}
	}
	if a, b := normSandbox(again[0]), normSandbox(again[1]); a != b {
		t.Errorf("inspect after a restart differs:\npool %s\ncold %s", a, b)
	}
	// The httpd processes survived boxd; boxd listens again.
	for _, sb := range got {
		addr := net.JoinHostPort("127.0.0.1", fmt.Sprint(sb.Ports[0].HostPort))
		if body := get(t, addr); body != sb.Name {
			t.Errorf("after a restart %s: GET %s = %q", sb.Name, addr, body)
		}
	}
}
