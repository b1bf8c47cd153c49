//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	gocni "github.com/containerd/go-cni"
	"github.com/google/nftables"
	"golang.org/x/sys/unix"
)

// TestEgress runs a second boxd in a network namespace of the test's own
// (see egressNet) and checks what an egress sandbox can and cannot reach.
func TestEgress(t *testing.T) {
	e := newEgressNet(t)
	// A second boxd instance runs beside this one throughout: nothing of
	// its host-global state (bridge, subnet, tables, CNI cache) may touch
	// these tests' sandboxes.
	e.besideName = "e2e-2"
	e.start(t)
	t.Cleanup(func() { e.stop(t, syscall.SIGTERM) })
	e.must(t, "image", "import", "--rootfs", env.busybox, "--name", testImage)

	t.Run("CIDRAllowlist", func(t *testing.T) {
		id := e.create(t, h1Addr+"/32:80", "10.77.0.0/24")
		e.reaches(t, id, "http://"+h1Addr+"/", "h1")
		// The port limits the entry: :8080 on the same host is refused.
		e.refused(t, id, "http://"+h1Addr+":8080/")
		e.refused(t, id, "http://"+h2Addr+"/")
		// A private network of the host's own is blocked unless named
		// exactly as a CIDR, as here.
		e.reaches(t, id, "http://"+privAddr+"/", "h2")

		var sb struct {
			Network struct {
				Mode    string   `json:"mode"`
				Allow   []string `json:"allow"`
				Address string   `json:"address"`
			} `json:"network"`
			Security struct {
				Network bool `json:"network"`
			} `json:"security"`
		}
		must(t, json.Unmarshal([]byte(e.must(t, "inspect", id)), &sb))
		if sb.Network.Mode != "egress" || strings.Join(sb.Network.Allow, ",") != h1Addr+"/32:80,10.77.0.0/24" ||
			!strings.HasPrefix(sb.Network.Address, "10.213.0.") || !sb.Security.Network {
			t.Errorf("inspect network = %+v, security.network %v", sb.Network, sb.Security.Network)
		}
		if ls := e.must(t, "ls", "--json"); !strings.Contains(ls, sb.Network.Address) || !strings.Contains(ls, `"egress"`) {
			t.Errorf("ls --json does not show the network: %s", ls)
		}
	})

	t.Run("AlwaysBlocked", func(t *testing.T) {
		other := e.create(t, "*")
		// A server in the other sandbox, on its own address.
		e.must(t, "exec", "-d", other, "--", "sh", "-c", "while true; do echo other | nc -l -p 9000; done")
		var o struct {
			Network struct {
				Address string `json:"address"`
			} `json:"network"`
		}
		must(t, json.Unmarshal([]byte(e.must(t, "inspect", other)), &o))

		id := e.create(t, "*")
		// Open egress reaches both test hosts...
		e.reaches(t, id, "http://"+h1Addr+"/", "h1")
		e.reaches(t, id, "http://"+h1Addr+":8080/", "h1-8080")
		e.reaches(t, id, "http://"+h2Addr+"/", "h2")
		// ...but never metadata, boxd's host, the host's private networks or
		// another sandbox.
		e.refused(t, id, "http://"+metaAddr+"/")
		e.refused(t, id, "http://"+bAddr+":8081/")
		e.refused(t, id, "http://10.213.0.1:8081/")
		// Open egress resolves any name; a blocked address stays blocked.
		if got := e.lookup(t, id, "denied.test"); strings.Join(got, ",") != h2Addr {
			t.Errorf("denied.test resolved to %v under '*', want %s", got, h2Addr)
		}
		e.lookup(t, id, "metadata.test")
		e.refused(t, id, "http://"+metaAddr+"/")
		e.refused(t, id, "http://"+privAddr+"/")
		out, _, code := e.boxctl("exec", "--timeout", "10s", id, "--", "sh", "-c", "nc -w 3 "+o.Network.Address+" 9000 </dev/null")
		if code == 0 && strings.Contains(out, "other") {
			t.Errorf("sandbox reached another sandbox at %s:9000: %q", o.Network.Address, out)
		}
		// The other sandbox's server is there: it answers itself.
		if got := e.must(t, "exec", other, "--", "sh", "-c", "nc -w 3 127.0.0.1 9000 </dev/null"); got != "other" {
			t.Errorf("other sandbox's own server answered %q", got)
		}
	})

	t.Run("Names", func(t *testing.T) {
		id := e.create(t, "allowed.test:80", "*.wild.test", "metadata.test", "boxdhost.test")
		if got := e.must(t, "exec", id, "--", "cat", "/etc/resolv.conf"); !strings.Contains(got, "nameserver 10.213.0.1") {
			t.Errorf("resolv.conf = %q, want boxd's resolver", got)
		}
		// Before the name is looked up its address is not allowed.
		e.refused(t, id, "http://"+h1Addr+"/")
		if got := e.lookup(t, id, "allowed.test"); strings.Join(got, ",") != h1Addr {
			t.Fatalf("allowed.test resolved to %v, want %s", got, h1Addr)
		}
		e.reaches(t, id, "http://"+h1Addr+"/", "h1")
		// The entry's port limits what the answer lets through.
		e.refused(t, id, "http://"+h1Addr+":8080/")
		// A name outside the list does not resolve, and its address is
		// unreachable by IP too.
		if got := e.lookup(t, id, "denied.test"); len(got) != 0 {
			t.Errorf("denied.test resolved to %v", got)
		}
		e.refused(t, id, "http://"+h2Addr+"/")
		// Nor can the sandbox ask the upstream server itself.
		if got := e.lookup(t, id, "denied.test", h1Addr); len(got) != 0 {
			t.Errorf("denied.test resolved through %s directly: %v", h1Addr, got)
		}
		// An allowed name that points at a blocked address gains nothing:
		// the resolver removes the record from its answer.
		if got := e.lookup(t, id, "metadata.test"); len(got) != 0 {
			t.Errorf("metadata.test resolved to %v", got)
		}
		e.refused(t, id, "http://"+metaAddr+"/")
		if got := e.lookup(t, id, "boxdhost.test"); len(got) != 0 {
			t.Errorf("boxdhost.test resolved to %v", got)
		}
		e.refused(t, id, "http://"+bAddr+":8081/")
		// A wildcard allows names below it.
		if got := e.lookup(t, id, "a.wild.test"); strings.Join(got, ",") != h2Addr {
			t.Fatalf("a.wild.test resolved to %v, want %s", got, h2Addr)
		}
		e.reaches(t, id, "http://"+h2Addr+"/", "h2")
		// What this sandbox's lookups opened is this sandbox's alone.
		other := e.create(t, h1Addr+"/32:9")
		e.refused(t, other, "http://"+h2Addr+"/")
		e.refused(t, other, "http://"+h1Addr+"/")
	})

	t.Run("AllowAtRunTime", func(t *testing.T) {
		id := e.create(t, h1Addr+"/32:80")
		e.refused(t, id, "http://"+h2Addr+"/")
		if got := e.must(t, "network", "allow", id, h2Addr, "denied.test"); got != h1Addr+"/32:80\n"+h2Addr+"/32\ndenied.test" {
			t.Errorf("network allow printed %q", got)
		}
		e.reaches(t, id, "http://"+h2Addr+"/", "h2")
		if got := e.lookup(t, id, "denied.test"); strings.Join(got, ",") != h2Addr {
			t.Errorf("denied.test after network allow resolved to %v", got)
		}
		e.must(t, "network", "deny", id, h2Addr)
		// Still reachable: denied.test's answer admitted it... until the
		// deny of the name too, which forgets every answer.
		e.must(t, "network", "deny", id, "denied.test")
		e.refused(t, id, "http://"+h2Addr+"/")
		if got := e.lookup(t, id, "denied.test"); len(got) != 0 {
			t.Errorf("denied.test after network deny resolved to %v", got)
		}
		e.reaches(t, id, "http://"+h1Addr+"/", "h1")
		var sb struct {
			Network struct {
				Allow []string `json:"allow"`
			} `json:"network"`
		}
		must(t, json.Unmarshal([]byte(e.must(t, "inspect", id)), &sb))
		if strings.Join(sb.Network.Allow, ",") != h1Addr+"/32:80" {
			t.Errorf("inspect after deny: allow = %v", sb.Network.Allow)
		}

		_, stderr, code := e.boxctl("network", "allow", id, "10.0.0.0/33")
		if code == 0 || !strings.Contains(stderr, "invalid_argument") || !strings.Contains(stderr, "allow[0]") {
			t.Errorf("network allow of a bad CIDR: exit %d, %s", code, stderr)
		}
		none := e.must(t, "create", "--memory", "64m")
		t.Cleanup(func() { _, _, _ = e.boxctl("rm", "-f", none) })
		_, stderr, code = e.boxctl("network", "allow", none, h2Addr)
		if code == 0 || !strings.Contains(stderr, "failed_precondition") {
			t.Errorf("network allow on a none sandbox: exit %d, %s", code, stderr)
		}
	})

	t.Run("KillRestart", func(t *testing.T) {
		id := e.create(t, h1Addr+"/32:80", "denied.test")
		orphan := e.create(t, "*")
		e.reaches(t, orphan, "http://"+h2Addr+"/", "h2")
		e.stop(t, syscall.SIGKILL)
		// While boxd is down the orphan's container goes behind its back:
		// its veth, lease and rules now belong to no sandbox.
		c := namespaces.WithNamespace(ctx(t), e.namespace)
		ctr, err := env.ctr.LoadContainer(c, orphan)
		must(t, err)
		task, err := ctr.Task(c, nil)
		must(t, err)
		_, err = task.Delete(c, client.WithProcessKill)
		must(t, err)
		must(t, ctr.Delete(c, client.WithSnapshotCleanup))
		e.start(t)

		// The reconciler removes the orphan's state...
		deadline := time.Now().Add(10 * time.Second)
		for {
			left := strings.Join(e.leftovers(t), " ")
			if !strings.Contains(left, orphan) && strings.Count(left, "ipam lease") == 1 && strings.Count(left, "link:") == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("orphan %s's network state not collected: %s", orphan, left)
			}
			time.Sleep(200 * time.Millisecond)
		}
		// ...and the surviving sandbox keeps its rules, resolver and
		// allowlist changes.
		e.reaches(t, id, "http://"+h1Addr+"/", "h1")
		e.refused(t, id, "http://"+h1Addr+":8080/")
		if got := e.lookup(t, id, "denied.test"); strings.Join(got, ",") != h2Addr {
			t.Errorf("denied.test after restart resolved to %v", got)
		}
		e.reaches(t, id, "http://"+h2Addr+"/", "h2")
		if got := e.lookup(t, id, "allowed.test"); len(got) != 0 {
			t.Errorf("allowed.test after restart resolved to %v", got)
		}
		e.must(t, "network", "allow", id, "198.18.0.0/24:8080")
		e.reaches(t, id, "http://"+h1Addr+":8080/", "h1-8080")
		e.must(t, "rm", id)
		e.clean(t, "after kill -9, restart and delete")
	})

	// A host reboot, for one sandbox: boxd dies, and with the host go the
	// namespace's pin (the file stays, empty), the veth, the bridge and
	// boxd's nftables tables, while the address lease and libcni's cache
	// are on disk. The restarted boxd's reconciler restarts the dead init,
	// which needs the network made again from the label.
	t.Run("HostRestart", func(t *testing.T) {
		id := e.create(t, h1Addr+"/32:80")
		e.reaches(t, id, "http://"+h1Addr+"/", "h1")
		e.stop(t, syscall.SIGKILL)
		c := namespaces.WithNamespace(ctx(t), e.namespace)
		ctr, err := env.ctr.LoadContainer(c, id)
		must(t, err)
		task, err := ctr.Task(c, nil)
		must(t, err)
		exited, err := task.Wait(c)
		must(t, err)
		must(t, task.Kill(c, syscall.SIGKILL))
		<-exited
		pin := filepath.Join(e.stateDir, "network", "netns", id)
		must(t, unix.Unmount(pin, unix.MNT_DETACH))
		ipCmd(t, "-n", e.b, "link", "del", "boxdt0")
		inNetns(t, e.b, func() {
			nc, err := nftables.New()
			must(t, err)
			nc.DelTable(&nftables.Table{Name: "boxd", Family: nftables.TableFamilyINet})
			nc.DelTable(&nftables.Table{Name: "boxd", Family: nftables.TableFamilyBridge})
			must(t, nc.Flush())
		})
		e.start(t)

		deadline := time.Now().Add(60 * time.Second)
		for {
			var sb struct {
				State        string `json:"state"`
				InitRestarts int    `json:"init_restarts"`
				Refused      string `json:"restart_refused"`
			}
			must(t, json.Unmarshal([]byte(e.must(t, "inspect", id)), &sb))
			if sb.State == "running" && sb.InitRestarts >= 1 {
				break
			}
			if sb.Refused != "" || time.Now().After(deadline) {
				t.Fatalf("sandbox %s not restarted: %+v\n%s", id, sb, tail(e.log))
			}
			time.Sleep(300 * time.Millisecond)
		}
		e.reaches(t, id, "http://"+h1Addr+"/", "h1")
		e.refused(t, id, "http://"+h2Addr+"/")
		if !strings.Contains(e.must(t, "exec", id, "--", "cat", "/etc/resolv.conf"), "nameserver 10.213.0.1") {
			t.Errorf("resolv.conf after the restart is not the gateway's")
		}
		e.must(t, "rm", id)
		e.clean(t, "after a host restart and delete")
	})

	// A sandbox attached by a boxd that still ran the CNI loopback plugin
	// (the bridge's interface was eth1 then) is removed with that layout:
	// here one left by a boxd killed before it recorded the container, so
	// the reconciler collects it.
	t.Run("LegacyLayoutCollected", func(t *testing.T) {
		const id = "0123456789ab"
		e.stop(t, syscall.SIGKILL) // its reconciler would collect a half-made attachment
		pin := filepath.Join(e.stateDir, "network", "netns", id)
		f, err := os.OpenFile(pin, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o444)
		must(t, err)
		f.Close()
		// A namespace pinned there, set up as the old boxd did.
		done := make(chan error, 1)
		go func() {
			runtime.LockOSThread() // the thread ends in the new namespace
			if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
				done <- err
				return
			}
			done <- unix.Mount(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()), pin, "none", unix.MS_BIND, "")
		}()
		must(t, <-done)
		conf := fmt.Sprintf(`{"cniVersion": "1.0.0", "name": "boxdt0", "plugins": [{"type": "bridge", "bridge": "boxdt0", "isGateway": true,
			"ipam": {"type": "host-local", "ranges": [[{"subnet": "10.213.0.0/24"}]], "dataDir": %q}}]}`, filepath.Join(e.stateDir, "network", "ipam"))
		legacy, err := gocni.New(gocni.WithPluginDir([]string{"/usr/lib/cni"}), gocni.WithMinNetworkCount(2),
			gocni.WithLoNetwork, gocni.WithConfListBytes([]byte(conf)))
		must(t, err)
		// Serially: the plugins must be started from this thread, in B.
		inNetns(t, e.b, func() {
			_, err := legacy.SetupSerially(ctx(t), id, pin)
			must(t, err)
		})
		e.start(t)
		left := strings.Join(e.leftovers(t), " ")
		if !strings.Contains(left, "cni cache: boxdt0-"+id+"-eth1") || !strings.Contains(left, "ipam lease") {
			t.Fatalf("the legacy attachment is not there to collect: %s", left)
		}
		deadline := time.Now().Add(20 * time.Second)
		for len(e.leftovers(t)) > 0 && time.Now().Before(deadline) {
			time.Sleep(200 * time.Millisecond)
		}
		e.clean(t, "after the reconciler collected a legacy attachment")
		if _, err := os.Stat("/var/lib/cni/results/cni-loopback-" + id + "-lo"); err == nil {
			t.Errorf("libcni's cache of the legacy loopback attachment is left")
		}
	})

	t.Run("CleanAfterDelete", func(t *testing.T) {
		id := e.create(t, h1Addr)
		e.reaches(t, id, "http://"+h1Addr+"/", "h1")
		e.must(t, "rm", id)
		e.clean(t, "after delete")
	})

	t.Run("CleanAfterExpiry", func(t *testing.T) {
		id := e.must(t, "create", "--memory", "64m", "--network", "egress", "--allow", h1Addr, "--ttl", "1s")
		deadline := time.Now().Add(15 * time.Second)
		for {
			if _, _, code := e.boxctl("inspect", id); code != 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("sandbox %s did not expire", id)
			}
			time.Sleep(200 * time.Millisecond)
		}
		// The container goes first, its network right after.
		for len(e.leftovers(t)) > 0 && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		e.clean(t, "after expiry")
	})

	// Create time with --network egress next to none, interleaved; the
	// figures go to the log (docs/network.md quotes them).
	t.Run("CreateTime", func(t *testing.T) {
		const n = 10
		var none, egress []time.Duration
		for i := 0; i < n; i++ {
			for _, mode := range []string{"none", "egress"} {
				t0 := time.Now()
				id := e.must(t, "create", "--memory", "64m", "--network", mode)
				d := time.Since(t0)
				e.must(t, "rm", id)
				if mode == "none" {
					none = append(none, d)
				} else {
					egress = append(egress, d)
				}
			}
		}
		slices.Sort(none)
		slices.Sort(egress)
		t.Logf("boxctl create, median of %d: none %v, egress %v (+%v); min none %v, egress %v",
			n, none[n/2], egress[n/2], egress[n/2]-none[n/2], none[0], egress[0])
		// boxd's own measure, without boxctl's start: the "ready" phase of
		// its create timing (egress creates have a "network" phase).
		b, err := os.ReadFile(e.log)
		must(t, err)
		var readyNone, readyEgress []time.Duration
		for _, l := range strings.Split(string(b), "\n") {
			_, r, ok := strings.Cut(l, "msg=\"create timing\"")
			if !ok {
				continue
			}
			_, v, ok := strings.Cut(r, " ready=")
			d, err := time.ParseDuration(strings.Fields(v + " ")[0])
			if !ok || err != nil {
				continue
			}
			if strings.Contains(r, " network=") {
				readyEgress = append(readyEgress, d)
			} else {
				readyNone = append(readyNone, d)
			}
		}
		if len(readyNone) >= n && len(readyEgress) >= n {
			readyNone, readyEgress = readyNone[len(readyNone)-n:], readyEgress[len(readyEgress)-n:]
			slices.Sort(readyNone)
			slices.Sort(readyEgress)
			t.Logf("boxd create (ready), median of %d: none %v, egress %v (+%v)", n, readyNone[n/2], readyEgress[n/2], readyEgress[n/2]-readyNone[n/2])
		}
		e.clean(t, "after the timing run")
	})

	t.Run("BadInput", func(t *testing.T) {
		for _, c := range []struct {
			args  []string
			field string
		}{
			{[]string{"--network", "egress", "--allow", "10.0.0.0/33"}, "network.allow[0]"},
			{[]string{"--network", "egress", "--allow", "10.1.2.3/8"}, "network.allow[0]"},
			{[]string{"--network", "egress", "--allow", h1Addr, "--allow", h1Addr + ":0"}, "network.allow[1]"},
			{[]string{"--network", "egress", "--allow", h1Addr + ":70000"}, "network.allow[0]"},
			{[]string{"--network", "egress", "--allow", "bad_name!.org"}, "network.allow[0]"},
			{[]string{"--network", "bridge"}, "network.mode"},
			{[]string{"--allow", h1Addr}, "network.allow"},
		} {
			_, stderr, code := e.boxctl(append([]string{"create"}, c.args...)...)
			if code == 0 || !strings.Contains(stderr, "invalid_argument") || !strings.Contains(stderr, c.field) {
				t.Errorf("create %v: exit %d, stderr %q; want invalid_argument naming %s", c.args, code, stderr, c.field)
			}
		}
		if ls := e.must(t, "ls"); strings.Count(ls, "\n") > 0 {
			t.Errorf("bad creates left sandboxes:\n%s", ls)
		}
		e.clean(t, "after bad input")
	})

	t.Run("NoForwarding", func(t *testing.T) {
		e.setForward(t, false)
		defer e.setForward(t, true)
		_, stderr, code := e.boxctl("create", "--network", "egress", "--allow", h1Addr)
		if code == 0 || !strings.Contains(stderr, "failed_precondition") || !strings.Contains(stderr, "ip_forward") {
			t.Errorf("create without ip_forward: exit %d, stderr %q; want failed_precondition naming ip_forward", code, stderr)
		}
		e.clean(t, "after a create refused for ip_forward")
	})

	t.Run("CleanAfterFailedCreate", func(t *testing.T) {
		// An init that dies at once fails the create after the network is
		// set up.
		bad := filepath.Join(t.TempDir(), "bad-init")
		must(t, os.WriteFile(bad, []byte("#!/bin/sh\necho failing on purpose >&2\nsleep 0.3\nexit 7\n"), 0o755)) // not exit 3: that is the init's unknown-user code
		e.stop(t, syscall.SIGTERM)
		e.start(t, "--init-binary", bad)
		_, stderr, code := e.boxctl("create", "--network", "egress", "--allow", h1Addr)
		e.stop(t, syscall.SIGTERM)
		e.start(t)
		if code == 0 || !strings.Contains(stderr, "init exited") {
			t.Fatalf("create with a dying init: exit %d, stderr %q", code, stderr)
		}
		e.clean(t, "after a failed create")
	})
}
