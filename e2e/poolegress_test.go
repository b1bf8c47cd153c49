//go:build linux

package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"golang.org/x/sys/unix"

	"github.com/boxd-dev/boxd/internal/rpcclient"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// TestPoolEgress: with --warm-pool N@egress, a create with --network
// egress, an allowlist, a published port and a hostname is served by a
// member and gives what a cold create of the same request gives: inspect,
// the allowlist enforced, boxd's resolver, a namespace sandbox root cannot
// reconfigure; after a SIGKILLed boxd starts again both keep their network.
// A member whose attach fails is destroyed with what it held, and the
// create is made cold.
func TestPoolEgress(t *testing.T) {
	e := newEgressNet(t)
	e.start(t, "--warm-pool", "1@egress")
	c := namespaces.WithNamespace(ctx(t), e.namespace)
	t.Cleanup(func() {
		for _, name := range []string{"pooled", "cold", "fallback"} {
			_, _, _ = e.boxctl("rm", "-f", name)
		}
		// A boxd with no egress pool destroys the idle member, and its
		// network namespace's pin, at start.
		e.stop(t, syscall.SIGTERM)
		e.start(t)
		waitPool(t, c, 0, e.dir)
		// Nothing of the members, handed out or not, is left.
		for deadline := time.Now().Add(10 * time.Second); len(e.leftovers(t)) > 0 && time.Now().Before(deadline); {
			time.Sleep(100 * time.Millisecond)
		}
		e.clean(t, "after the egress pool is gone")
		e.stop(t, syscall.SIGTERM)
	})
	e.must(t, "image", "import", "--rootfs", env.busybox, "--name", testImage)
	api := rpcclient.New(e.socket)
	members := waitPool(t, c, 1, e.dir)
	req := func(name string, cold bool) *boxdv1.CreateSandboxRequest {
		return &boxdv1.CreateSandboxRequest{
			Name: name, Cold: cold, Hostname: "agent", Limits: &boxdv1.Limits{Memory: "64m"},
			Network: &boxdv1.NetworkRequest{Mode: "egress", Allow: []string{h1Addr + "/32:80"}},
			Publish: []*boxdv1.PublishedPort{{Port: 8080}},
		}
	}
	got := createPooledAndCold(t, c, api, members, req)
	check := func(when string) {
		t.Helper()
		for _, sb := range got {
			if sb.Network.GetMode() != "egress" || !strings.HasPrefix(sb.Network.GetAddress(), "10.213.0.") {
				t.Errorf("%s %s: network %v", when, sb.Name, sb.Network)
			}
			e.reaches(t, sb.Id, "http://"+h1Addr+"/", "h1")
			e.refused(t, sb.Id, "http://"+h1Addr+":8080/")
			e.refused(t, sb.Id, "http://"+h2Addr+"/")
			if out := e.must(t, "exec", sb.Id, "--", "cat", "/etc/resolv.conf"); !strings.Contains(out, "nameserver 10.213.0.1") {
				t.Errorf("%s %s: resolv.conf %q", when, sb.Name, out)
			}
			// The namespace is boxd's: sandbox root cannot take another address.
			if out, _, code := e.boxctl("exec", sb.Id, "--", "ip", "addr", "add", "10.213.0.250/24", "dev", "eth0"); code == 0 {
				t.Errorf("%s %s: sandbox root added an address to its interface: %s", when, sb.Name, out)
			}
			if out := e.must(t, "exec", sb.Id, "--", "hostname"); out != "agent" {
				t.Errorf("%s %s: hostname %q", when, sb.Name, out)
			}
		}
	}
	check("after create")
	e.stop(t, syscall.SIGKILL)
	e.start(t, "--warm-pool", "1@egress")
	var again []*boxdv1.Sandbox
	for _, sb := range got {
		g, err := api.GetSandbox(c, connect.NewRequest(&boxdv1.GetSandboxRequest{Id: sb.Id}))
		if err != nil {
			t.Fatal(err)
		}
		again = append(again, g.Msg.Sandbox)
	}
	if a, b := normSandbox(again[0]), normSandbox(again[1]); a != b {
		t.Errorf("inspect after a restart differs:\npool %s\ncold %s", a, b)
	}
	check("after a restart")

	// A member whose attach fails (its namespace's pin is gone) is
	// destroyed with everything of it; the create is made cold.
	member := waitPool(t, c, 1, e.dir)[0]
	pin := filepath.Join(e.stateDir, "network", "netns", member)
	must(t, unix.Unmount(pin, unix.MNT_DETACH))
	sb, err := api.CreateSandbox(c, connect.NewRequest(req("fallback", false)))
	if err != nil {
		t.Fatalf("create after a failed hand-out: %v", err)
	}
	if sb.Msg.Sandbox.Id == member || slices.Contains(members, sb.Msg.Sandbox.Id) {
		t.Fatalf("create got the broken member %s", member)
	}
	e.reaches(t, sb.Msg.Sandbox.Id, "http://"+h1Addr+"/", "h1")
	if _, err := env.ctr.LoadContainer(c, member); err == nil {
		t.Errorf("the member whose hand-out failed is still there")
	}
	if _, err := os.Stat(pin); err == nil {
		t.Errorf("the failed member's namespace pin is left: %s", pin)
	}
	for _, l := range e.leftovers(t) {
		if strings.Contains(l, member) {
			t.Errorf("the failed member left %s", l)
		}
	}
}
