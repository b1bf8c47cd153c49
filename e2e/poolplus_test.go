//go:build linux

package e2e

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/boxd-dev/boxd/internal/rpcclient"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
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

// TestPoolAdoptionUserDisk: a create with a default user and workdir is
// served by a pool member warmed with the daemon's default disk cap and
// gives what a cold create of the same request gives: inspect, the uid,
// gid, home and working directory of commands, files made through the
// files API owned by the user, the user unable to write where root owns,
// and the cap enforced. A create with another disk cap is made cold, and
// a user the sandbox does not know fails alike from the pool and cold.
func TestPoolAdoptionUserDisk(t *testing.T) {
	sock, dir, _, c := poolDaemon(t, namespace+"-poolud", "--warm-pool", "1", "--default-disk", "64m")
	api := rpcclient.New(sock)
	members := waitPool(t, c, 1, dir)
	req := func(name string, cold bool) *boxdv1.CreateSandboxRequest {
		return &boxdv1.CreateSandboxRequest{Name: name, Cold: cold, User: "sandbox", Workdir: "/workspace/proj"}
	}
	got := createPooledAndCold(t, c, api, members, req)
	// The pool's hit count: the pooled create, and --cold as unfit.
	if p := poolRow(t, c, sock, ""); p.HandedOut != 1 || p.ColdEmpty != 0 || p.ColdUnfit != 1 {
		t.Errorf("pool counts after a pooled and a cold create: %v", p)
	}
	files := rpcclient.NewFiles(sock)
	var seen []string
	for _, sb := range got {
		if sb.User != "sandbox" || sb.Workdir != "/workspace/proj" || sb.DiskBytes != 64<<20 {
			t.Errorf("%s: inspect user %q workdir %q disk %d", sb.Name, sb.User, sb.Workdir, sb.DiskBytes)
		}
		if _, err := files.MakeDir(c, connect.NewRequest(&boxdv1.MakeDirRequest{SandboxId: sb.Id, Path: "/tmp/viaapi"})); err != nil {
			t.Fatalf("%s: mkdir through the files API: %v", sb.Name, err)
		}
		out, stderr, code := boxctlAt(sock, "exec", sb.Id, "--", "sh", "-c",
			"id -u; id -g; pwd; echo $HOME; stat -c %u /tmp/viaapi; touch /etc/x 2>/dev/null && echo wrote-etc; echo")
		if code != 0 {
			t.Fatalf("%s: exec: exit %d %s", sb.Name, code, stderr)
		}
		seen = append(seen, out)
		// The cap is the member's ext4 image: writing past it fails.
		out, stderr, code = boxctlAt(sock, "exec", "--user", "0", sb.Id, "--", "sh", "-c", "dd if=/dev/zero of=/workspace/bomb bs=1M count=100 2>&1")
		if code == 0 || !strings.Contains(out+stderr, "No space left on device") {
			t.Errorf("%s: 100 MiB under a 64m cap: exit %d, %q %q; want ENOSPC", sb.Name, code, out, stderr)
		}
	}
	if seen[0] != seen[1] || seen[0] != "1000\n1000\n/workspace/proj\n/home/sandbox\n1000\n\n" {
		t.Errorf("inside the sandboxes:\npool %q\ncold %q", seen[0], seen[1])
	}

	// A disk cap other than the default is made cold, the member kept.
	members = waitPool(t, c, 1, dir)
	sb, err := api.CreateSandbox(c, connect.NewRequest(&boxdv1.CreateSandboxRequest{Name: "bigdisk", Limits: &boxdv1.Limits{Disk: "128m"}}))
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(members, sb.Msg.Sandbox.Id) || sb.Msg.Sandbox.DiskBytes != 128<<20 {
		t.Errorf("create --disk 128m got %s (disk %d); want a cold sandbox with its own cap, not the member %v", sb.Msg.Sandbox.Id, sb.Msg.Sandbox.DiskBytes, members)
	}
	if now := waitPool(t, c, 1, dir); !slices.Equal(now, members) {
		t.Errorf("members %v after a cold create, want %v untouched", now, members)
	}

	// An unknown user: the same code and field from the pool and cold;
	// nothing of either is left.
	n := countIn(t, api, c)
	for _, cold := range []bool{false, true} {
		_, err := api.CreateSandbox(c, connect.NewRequest(&boxdv1.CreateSandboxRequest{Cold: cold, User: "nosuchuser"}))
		if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "user") {
			t.Errorf("create --user nosuchuser (cold %v): %v; want invalid_argument naming user", cold, err)
		}
	}
	if m := countIn(t, api, c); m != n {
		t.Errorf("%d sandboxes after the refused creates, want %d", m, n)
	}
	// The refused pooled create counts neither as handed out nor cold.
	if p := poolRow(t, c, sock, ""); p.HandedOut != 1 || p.ColdEmpty != 0 || p.ColdUnfit != 3 {
		t.Errorf("pool counts at the end: %v, want 1 handed out, 3 cold as unfit", p)
	}
}

// poolRow is the test image's runc pool for network netw ("" or egress)
// as ListPools shows it.
func poolRow(t *testing.T, c context.Context, sock, netw string) *boxdv1.Pool {
	t.Helper()
	ls, err := rpcclient.NewPool(sock).ListPools(c, connect.NewRequest(&boxdv1.ListPoolsRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ls.Msg.Pools {
		if p.Image == testImage && p.Runtime == "runc" && p.Network == netw {
			return p
		}
	}
	t.Fatalf("no %s pool of network %q: %v", testImage, netw, ls.Msg.Pools)
	return nil
}

// countIn is how many sandboxes api lists.
func countIn(t *testing.T, api boxdv1connect.SandboxServiceClient, c context.Context) int {
	t.Helper()
	ls, err := api.ListSandboxes(c, connect.NewRequest(&boxdv1.ListSandboxesRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	return len(ls.Msg.Sandboxes)
}

// TestPoolDiskDefaultChanged: members are capped at the default disk cap
// when they start; a boxd restarted with another --default-disk destroys
// the members it finds instead of handing out their old cap as the new
// one, and a pooled create gets the new cap.
func TestPoolDiskDefaultChanged(t *testing.T) {
	// poolDaemon's restart reads this slice again: the cap is changed in
	// place before it.
	flags := []string{"--warm-pool", "1", "--default-disk", "64m"}
	sock, dir, kill, c := poolDaemon(t, namespace+"-pooldisk", flags...)
	old := waitPool(t, c, 1, dir)
	flags[3] = "128m"
	kill()
	// boxd answers before it has gone through the leftovers: wait for
	// the old member to go.
	var members []string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if members = waitPool(t, c, 1, dir); !slices.Contains(members, old[0]) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("member %s, started with a 64m cap, kept by a boxd whose default is 128m", old[0])
		}
	}
	api := rpcclient.New(sock)
	sb, err := api.CreateSandbox(c, connect.NewRequest(&boxdv1.CreateSandboxRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(members, sb.Msg.Sandbox.Id) || sb.Msg.Sandbox.DiskBytes != 128<<20 {
		t.Errorf("create got %s (disk %d), want the member %v with 128m", sb.Msg.Sandbox.Id, sb.Msg.Sandbox.DiskBytes, members)
	}
	out, stderr, code := boxctlAt(sock, "exec", sb.Msg.Sandbox.Id, "--", "sh", "-c", "dd if=/dev/zero of=/workspace/f bs=1M count=90 2>&1 && echo wrote")
	if code != 0 || !strings.Contains(out, "wrote") {
		t.Errorf("90 MiB under a 128m cap: exit %d %q %q", code, out, stderr)
	}
}
