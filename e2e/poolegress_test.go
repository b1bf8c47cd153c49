//go:build linux

package e2e

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/google/nftables"
	"golang.org/x/sys/unix"

	"github.com/boxd-dev/boxd/internal/rpcclient"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// TestPoolEgress: with --warm-pool N@egress, a create with --network
// egress, an allowlist (an address and a name), a published port, a
// hostname, a user and a workdir is served by a member and gives what a
// cold create of the same request gives: inspect, the same firewall rules
// and sets, the allowlist enforced, boxd's resolver answering only the
// allowed name, a namespace sandbox root cannot reconfigure, the user;
// after a SIGKILLed boxd starts again both keep their network.
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
			User: "sandbox", Workdir: "/workspace/agent",
			Network: &boxdv1.NetworkRequest{Mode: "egress", Allow: []string{h1Addr + "/32:80", "allowed.test:80"}},
			Publish: []*boxdv1.PublishedPort{{Port: 8080}},
		}
	}
	got := createPooledAndCold(t, c, api, members, req)
	if p := poolRow(t, c, e.socket, "egress"); p.HandedOut != 1 || p.ColdUnfit != 1 {
		t.Errorf("egress pool counts after a pooled and a cold create: %v", p)
	}
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
			if got := e.lookup(t, sb.Id, "allowed.test"); strings.Join(got, ",") != h1Addr {
				t.Errorf("%s %s: allowed.test resolved to %v", when, sb.Name, got)
			}
			if got := e.lookup(t, sb.Id, "denied.test"); len(got) != 0 {
				t.Errorf("%s %s: denied.test resolved to %v", when, sb.Name, got)
			}
			if out := e.must(t, "exec", sb.Id, "--", "sh", "-c", "id -u; pwd"); out != "1000\n/workspace/agent" {
				t.Errorf("%s %s: user and workdir %q", when, sb.Name, out)
			}
			// The namespace is boxd's: sandbox root cannot take another address.
			if out, _, code := e.boxctl("exec", "--user", "0", sb.Id, "--", "ip", "addr", "add", "10.213.0.250/24", "dev", "eth0"); code == 0 {
				t.Errorf("%s %s: sandbox root added an address to its interface: %s", when, sb.Name, out)
			}
			if out := e.must(t, "exec", sb.Id, "--", "hostname"); out != "agent" {
				t.Errorf("%s %s: hostname %q", when, sb.Name, out)
			}
		}
		if a, b := e.sandboxRules(t, got[0].Id, got[0].Network.GetAddress()), e.sandboxRules(t, got[1].Id, got[1].Network.GetAddress()); a != b || a == "" {
			t.Errorf("%s: firewall differs:\npool %s\ncold %s", when, a, b)
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

// sandboxRules is the firewall boxd holds for the egress sandbox id at
// addr, in boxd's netns: its own chain's rules, its tagged rules in
// from_sandbox and in the bridge table, and its sets' elements, with its
// id, address and the kernel's handles and set ids taken out, so two
// sandboxes made from the same request compare equal.
func (e *egressNet) sandboxRules(t *testing.T, id, addr string) string {
	t.Helper()
	nsf, err := os.Open("/run/netns/" + e.b)
	must(t, err)
	defer nsf.Close()
	c, err := nftables.New(nftables.WithNetNSFd(int(nsf.Fd())))
	must(t, err)
	var b strings.Builder
	dump := func(tbl *nftables.Table, chain string, tagged bool) {
		rules, err := c.GetRules(tbl, &nftables.Chain{Name: chain, Table: tbl})
		must(t, err)
		for _, r := range rules {
			if tagged && string(r.UserData) != "boxd:"+id {
				continue
			}
			fmt.Fprintf(&b, "%s %s:", tbl.Name, chain)
			for _, x := range r.Exprs {
				fmt.Fprintf(&b, " %T%+v", x, x)
			}
			b.WriteString("\n")
		}
	}
	inet, err := c.ListTableOfFamily("boxd", nftables.TableFamilyINet)
	must(t, err)
	dump(inet, "sb_"+id, false)
	dump(inet, "from_sandbox", true)
	// The bridge table's rule names the sandbox's veth (a name of its
	// own): count it.
	if br, err := c.ListTableOfFamily("boxd", nftables.TableFamilyBridge); err == nil {
		rules, err := c.GetRules(br, &nftables.Chain{Name: "forward", Table: br})
		must(t, err)
		n := 0
		for _, r := range rules {
			if string(r.UserData) == "boxd:"+id {
				n++
			}
		}
		fmt.Fprintf(&b, "bridge forward: %d rules\n", n)
	}
	sets, err := c.GetSets(inet)
	must(t, err)
	for _, s := range sets {
		if !strings.Contains(s.Name, id) {
			continue
		}
		els, err := c.GetSetElements(s)
		must(t, err)
		fmt.Fprintf(&b, "set %s flags %v/%v/%v elements %d\n", s.Name, s.Constant, s.Interval, s.HasTimeout, len(els))
	}
	out := strings.ReplaceAll(b.String(), id, "ID")
	ip := net.ParseIP(addr).To4()
	out = strings.ReplaceAll(out, fmt.Sprint([]byte(ip)), "[ADDR]")
	out = regexp.MustCompile(`(SetID|Handle|Position|ID):\d+`).ReplaceAllString(out, "$1:_")
	return out
}
