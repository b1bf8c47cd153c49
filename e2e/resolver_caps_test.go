//go:build linux

package e2e

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestResolverFlood: root in an egress sandbox opens 2,000 TCP connections
// to boxd's resolver and keeps them alive with queries, then sends 1,000
// UDP queries as fast as it can. boxd carries at most 64 of its
// connections (its descriptors stay within that plus a small constant),
// answers REFUSED past 200 queries/s, and another sandbox still resolves
// over UDP and TCP meanwhile.
func TestResolverFlood(t *testing.T) {
	const perSandbox, qps = 64, 200
	e := newEgressNet(t)
	e.start(t)
	t.Cleanup(func() { e.stop(t, syscall.SIGTERM) })
	e.must(t, "image", "import", "--rootfs", env.busybox, "--name", testImage)
	flooder := e.must(t, "create", "--memory", "128m", "--network", "egress", "--allow", "allowed.test", "--ulimit", "nofile=8192")
	t.Cleanup(func() { _, _, _ = e.boxctl("rm", "-f", flooder) })
	other := e.create(t, "allowed.test")
	connflood(t, e.boxctl, flooder, other)
	comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", e.daemon.Process.Pid))
	if strings.TrimSpace(string(comm)) != "boxd" {
		t.Fatalf("pid %d is %q, not boxd", e.daemon.Process.Pid, comm)
	}
	pid := e.daemon.Process.Pid
	base := sockets(t, pid)
	stop := peakSockets(t, pid)
	e.must(t, "exec", "-d", flooder, "--", "sh", "-c", "/tmp/connflood dns 10.213.0.1:53 2000 12 >/tmp/flood.out 2>&1")
	out := ""
	deadline := time.Now().Add(90 * time.Second)
	for !strings.Contains(out, "opened") {
		if time.Now().After(deadline) {
			t.Fatalf("the flood did not finish opening: %q", out)
		}
		time.Sleep(200 * time.Millisecond)
		out, _, _ = e.boxctl("exec", flooder, "--", "cat", "/tmp/flood.out")
	}
	// Meanwhile another sandbox resolves, over UDP (nslookup) and TCP.
	if got := e.lookup(t, other, "allowed.test"); strings.Join(got, ",") != h1Addr {
		t.Errorf("another sandbox's lookup during the flood: %v, want %s", got, h1Addr)
	}
	if got, _, _ := e.boxctl("exec", other, "--", "/tmp/connflood", "dns", "10.213.0.1:53", "1", "0"); !strings.Contains(got, "opened 1") {
		t.Errorf("another sandbox's TCP query during the flood: %q", got)
	}
	for !strings.Contains(out, "held") {
		if time.Now().After(deadline) {
			t.Fatalf("the flood did not end: %q", out)
		}
		time.Sleep(500 * time.Millisecond)
		out, _, _ = e.boxctl("exec", flooder, "--", "cat", "/tmp/flood.out")
	}
	peak := stop()
	var opened, held int
	fmt.Sscanf(out, "opened %d\nheld %d", &opened, &held)
	t.Logf("boxd sockets: %d before, peak %d; flood: %q", base, peak, out)
	if limit := base + perSandbox + 32; peak > limit {
		t.Errorf("boxd held %d sockets during the flood (%d before), above the resolver's per-sandbox bound: %d", peak, base, limit)
	}
	if opened > perSandbox || held > perSandbox {
		t.Errorf("the sandbox opened %d and held %d connections to the resolver, above %d", opened, held, perSandbox)
	}

	// The query rate: 1,000 queries as fast as they go.
	start := time.Now()
	got := e.must(t, "exec", flooder, "--", "/tmp/connflood", "rate", "10.213.0.1:53", "1000")
	took := time.Since(start)
	var nx, refused, none int
	fmt.Sscanf(got, "NXDOMAIN %d REFUSED %d none %d", &nx, &refused, &none)
	t.Logf("1,000 UDP queries in %v: %s", took, strings.TrimSpace(got))
	if max := qps + int(took.Seconds()*qps) + 10; nx > max || refused == 0 {
		t.Errorf("1,000 queries in %v: %q; want at most %d answered, the rest REFUSED", took, got, max)
	}
	if got := e.lookup(t, other, "allowed.test"); strings.Join(got, ",") != h1Addr {
		t.Errorf("another sandbox's lookup after the rate flood: %v, want %s", got, h1Addr)
	}
}
