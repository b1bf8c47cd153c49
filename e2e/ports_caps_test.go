//go:build linux

package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/boxd-dev/boxd/internal/testenv"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// connflood builds testdata/connflood statically (once per test) and
// copies it into each sandbox as /tmp/connflood with cp, a boxctl cp.
func connflood(t *testing.T, cp func(args ...string) (string, string, int), ids ...string) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "connflood")
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = "/usr/local/go/bin/go"
	}
	cmd := exec.Command(goBin, "build", "-o", bin, "./e2e/testdata/connflood")
	cmd.Dir = testenv.RepoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build connflood: %v\n%s", err, out)
	}
	for _, id := range ids {
		if _, stderr, code := cp("cp", bin, id+":/tmp/connflood"); code != 0 {
			t.Fatalf("cp connflood into %s: %s", id, stderr)
		}
		if _, stderr, code := cp("exec", id, "--", "chmod", "755", "/tmp/connflood"); code != 0 {
			t.Fatalf("chmod connflood: %s", stderr)
		}
	}
}

// peakSockets samples pid's socket count every 50 ms until stop is called,
// which returns the highest count seen.
func peakSockets(t *testing.T, pid int) (stop func() int) {
	var peak atomic.Int64
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			if n := int64(sockets(t, pid)); n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-done:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return func() int {
		close(done)
		<-finished
		return int(peak.Load())
	}
}

// TestPublishedPortConnFlood: local clients flood four published ports of
// one sandbox whose server holds every connection. boxd carries at most
// 1,024 connections for the sandbox over all its ports (two descriptors
// each), resets the rest, and another sandbox's published port still
// answers meanwhile. Without the per-sandbox bound it carried 512 per port.
func TestPublishedPortConnFlood(t *testing.T) {
	const perSandbox, attempts = 1024, 600 // per port; 4 ports: 2,400
	ports := []string{"7001", "7002", "7003", "7004"}
	args := []string{"--memory", "256m", "--ulimit", "nofile=16384"}
	for _, p := range ports {
		args = append(args, "--publish", "0:"+p)
	}
	id := newSandbox(t, args...)
	other := newSandbox(t, "--publish", "0:8080")
	startHTTPD(t, other, 8080, "still here")
	otherAddr := portOf(t, other, 8080)
	get(t, otherAddr)
	connflood(t, boxctlRun, id)
	if _, err := boxctl(nil, "exec", "-d", id, "--", "sh", "-c", "/tmp/connflood serve "+strings.Join(ports, " ")+" >/tmp/serve.out 2>&1"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(sh(t, id, "cat /tmp/serve.out"), "listening") {
		if time.Now().After(deadline) {
			t.Fatal("connflood serve did not start")
		}
		time.Sleep(100 * time.Millisecond)
	}
	pid := env.daemon.Process.Pid
	base := sockets(t, pid)
	stop := peakSockets(t, pid)
	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for _, p := range ports {
		addr := portOf(t, id, uint32(mustAtoi(t, p)))
		for range attempts {
			if c, err := net.Dial("tcp", addr); err == nil {
				conns = append(conns, c)
			}
		}
	}
	time.Sleep(2 * time.Second) // every connection accepted and dialled in, or reset
	if got := get(t, otherAddr); got != "still here" {
		t.Errorf("another sandbox's published port during the flood: %q", got)
	}
	peak := stop()
	alive := 0
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); errors.Is(err, os.ErrDeadlineExceeded) {
			alive++
		}
	}
	t.Logf("boxd sockets: %d before, peak %d; %d of %d connections carried", base, peak, alive, len(conns))
	if limit := base + 2*perSandbox + 64; peak > limit {
		t.Errorf("boxd held %d sockets during the flood (%d before), above the sandbox bound's %d", peak, base, limit)
	}
	if alive > perSandbox {
		t.Errorf("%d connections carried for one sandbox, above %d", alive, perSandbox)
	}
	if alive < perSandbox/2 {
		t.Errorf("only %d connections carried: the flood did not reach the bound", alive)
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// inspectPorts is the ports part of boxctl inspect's JSON.
type inspectPorts struct {
	Ports []struct {
		HostIP   string `json:"host_ip"`
		HostPort int    `json:"host_port"`
		Port     int    `json:"port"`
		State    string `json:"state"`
		Error    string `json:"error"`
	} `json:"ports"`
}

func portsOf(t *testing.T, d *daemon, id string) inspectPorts {
	t.Helper()
	out, stderr, code := d.boxctl("inspect", id)
	if code != 0 {
		t.Fatalf("inspect %s: %s", id, stderr)
	}
	var p inspectPorts
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("inspect %s: %v", id, err)
	}
	return p
}

// TestPublishedPortTakenWhileDown: a port published, boxd down, another
// process takes the port, boxd up: boxd tries once, shows the port
// unpublished with the reason (inspect, boxctl port, an event), and does
// not take the port when its holder lets go. Publishing it again works.
func TestPublishedPortTakenWhileDown(t *testing.T) {
	d := startBoxd(t, "boxd-e2e-portdown", true)
	p := freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", p)
	out, stderr, code := d.boxctl("create", "--publish", fmt.Sprintf("%s:8080", addr))
	if code != 0 {
		t.Fatalf("create: %s", stderr)
	}
	id := strings.TrimSpace(out)
	if ps := portsOf(t, d, id); len(ps.Ports) != 1 || ps.Ports[0].State != "published" {
		t.Errorf("inspect before: %+v, want the port published", ps)
	}

	d.kill()
	holder, err := net.Listen("tcp", addr) // the host's own service
	if err != nil {
		t.Fatalf("take %s while boxd is down: %v", addr, err)
	}
	since := time.Now()
	d.start(t)
	ps := portsOf(t, d, id)
	if len(ps.Ports) != 1 || ps.Ports[0].HostPort != p || ps.Ports[0].State != "unpublished" || !strings.Contains(ps.Ports[0].Error, "in use") {
		t.Errorf("inspect after the restart: %+v, want the port unpublished, in use", ps)
	}
	if list, _, _ := d.boxctl("port", id); !strings.Contains(list, "unpublished") {
		t.Errorf("boxctl port lists %q, want it unpublished", list)
	}
	evs, _, _ := d.boxctl("events", "--since", since.Add(-time.Second).Format(time.RFC3339Nano), "--no-follow", "--filter", "sandbox="+id, "--filter", "type=port_unpublished")
	if !strings.Contains(evs, "port_unpublished") || !strings.Contains(evs, "in_use") || !strings.Contains(evs, addr) {
		t.Errorf("events: %q, want a port_unpublished event for %s, in_use", evs, addr)
	}

	// The holder restarts: boxd must not take the port meanwhile (its
	// reconcile pass runs every 300 ms here).
	holder.Close()
	time.Sleep(3 * time.Second)
	assertClosed(t, addr)
	if log, _ := os.ReadFile(filepath.Join(d.dir, "boxd.log")); strings.Count(string(log), "cannot listen again") > 1 {
		t.Errorf("boxd tried the port %d times", strings.Count(string(log), "cannot listen again"))
	}

	// Publishing it again is the owner's choice.
	out, stderr, code = d.boxctl("port", "--host-port", strconv.Itoa(p), id, "8080")
	if code != 0 || strings.TrimSpace(out) != addr {
		t.Fatalf("publish again: %q %s", out, stderr)
	}
	if ps := portsOf(t, d, id); len(ps.Ports) != 1 || ps.Ports[0].State != "published" || ps.Ports[0].Error != "" {
		t.Errorf("inspect after publishing again: %+v", ps)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("published again, %s does not accept: %v", addr, err)
	} else if c != nil {
		c.Close()
	}
}

// privilegedPort returns a port below the unprivileged start that nothing
// listens on at 127.0.0.1 nor at [::1].
func privilegedPort(t *testing.T) (port, start int) {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_unprivileged_port_start")
	if err != nil {
		t.Fatal(err)
	}
	start, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	if start < 2 {
		t.Fatalf("net.ipv4.ip_unprivileged_port_start is %d: every port is unprivileged on this host, nothing to refuse", start)
	}
	free := func(addr string) bool {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return false
		}
		ln.Close()
		return true
	}
	for _, p := range append([]int{25, 53}, func() []int {
		var ps []int
		for p := start - 1; p > 0; p-- {
			ps = append(ps, p)
		}
		return ps
	}()...) {
		if p < start && free(fmt.Sprintf("127.0.0.1:%d", p)) && free(fmt.Sprintf("[::1]:%d", p)) {
			return p, start
		}
	}
	t.Fatal("no free privileged port")
	return 0, 0
}

// TestPublishPrivilegedPort: a non-admin cannot make boxd listen on a host
// port below net.ipv4.ip_unprivileged_port_start, by create or by
// publishing later (permission_denied naming the field and the port);
// port 0 and unprivileged ports are fine; an admin may. After a boxd
// restart the admin's port listens again, and such a port recorded for a
// non-admin's sandbox without an admin's mark (as a boxd that did not
// check would have) is not listened on and is shown unpublished.
func TestPublishPrivilegedPort(t *testing.T) {
	sockGroup, adminGroup, ua, _, uc := hostUsers(t)
	d := startBoxd(t, "boxd-e2e-privport", true, "--socket-group", sockGroup, "--admin-group", adminGroup)
	if err := os.Chmod(filepath.Dir(d.dir), 0o711); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(d.dir, "boxctl")
	for _, name := range []string{"boxctl", "boxctl-full"} {
		if b, err := os.ReadFile(filepath.Join(filepath.Dir(env.boxctl), name)); err != nil || os.WriteFile(filepath.Join(d.dir, name), b, 0o755) != nil {
			t.Fatalf("copy %s: %v", name, err)
		}
	}
	as := func(u hostUser, args ...string) (string, string, int) {
		out, stderr, code, _ := boxctlAs(t, bin, u, d.sock, args...)
		return out, stderr, code
	}
	pp, start := privilegedPort(t)
	v4, v6 := fmt.Sprintf("127.0.0.1:%d", pp), fmt.Sprintf("[::1]:%d", pp)
	refused := func(what, stderr string, code int, field string) {
		t.Helper()
		if code == 0 || !strings.Contains(stderr, "permission_denied") || !strings.Contains(stderr, field) || !strings.Contains(stderr, strconv.Itoa(pp)) {
			t.Errorf("%s as a non-admin: exit %d, %q; want permission_denied naming %s and %d", what, code, stderr, field, pp)
		}
		assertClosed(t, v4)
		assertClosed(t, v6)
	}

	_, stderr, code := as(ua, "create", "--publish", v4+":2525")
	refused("create --publish "+v4, stderr, code, "publish[0].host_port")
	_, stderr, code = as(ua, "create", "--publish", "0:2525", "--publish", v6+":2525")
	refused("create --publish "+v6, stderr, code, "publish[1].host_port")
	if resp, err := apiAs(ua, d.sock).sb.ListSandboxes(ctx(t), connect.NewRequest(&boxdv1.ListSandboxesRequest{})); err != nil || len(resp.Msg.Sandboxes) != 0 {
		t.Errorf("refused creates left sandboxes: %v %v", resp, err)
	}

	// Port 0 and an unprivileged port are fine.
	free := freePort(t)
	out, stderr, code := as(ua, "create", "--publish", "0:2525", "--publish", fmt.Sprintf("%d:2526", free))
	if code != 0 {
		t.Fatalf("create with port 0 and %d (>= %d) as a non-admin: %s", free, start, stderr)
	}
	id := strings.TrimSpace(out)
	_, stderr, code = as(ua, "port", "--host-port", strconv.Itoa(pp), id, "2527")
	refused("port --host-port", stderr, code, "host_port")
	_, err := apiAs(ua, d.sock).sb.PublishPort(ctx(t), connect.NewRequest(&boxdv1.PublishPortRequest{SandboxId: id,
		Port: &boxdv1.PublishedPort{HostIp: "::1", HostPort: uint32(pp), Port: 2527}}))
	if connect.CodeOf(err) != connect.CodePermissionDenied || !strings.Contains(err.Error(), "host_port") {
		t.Errorf("PublishPort of [::1]:%d as a non-admin: %v, want permission_denied naming host_port", pp, err)
	}
	assertClosed(t, v6)

	// An admin may, on the same sandbox.
	out, stderr, code = as(uc, "port", "--host-port", strconv.Itoa(pp), id, "2527")
	if code != 0 || strings.TrimSpace(out) != v4 {
		t.Fatalf("admin's port --host-port %d: %q %s", pp, out, stderr)
	}

	// A record naming [::1]:pp for the non-admin's sandbox, without the
	// admin's mark, as a boxd that did not check would have written it.
	d.kill()
	ctr, err := env.ctr.LoadContainer(d.c, id)
	if err != nil {
		t.Fatal(err)
	}
	labels, err := ctr.Labels(d.c)
	if err != nil {
		t.Fatal(err)
	}
	var recorded []map[string]any
	if err := json.Unmarshal([]byte(labels["boxd.io/ports"]), &recorded); err != nil {
		t.Fatal(err)
	}
	recorded = append(recorded, map[string]any{"host_ip": "::1", "host_port": pp, "port": 2528, "protocol": "tcp"})
	b, _ := json.Marshal(recorded)
	if _, err := ctr.SetLabels(d.c, map[string]string{"boxd.io/ports": string(b)}); err != nil {
		t.Fatal(err)
	}
	d.start(t)
	if c, err := net.Dial("tcp", v4); err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("the admin's %s after a boxd restart: %v", v4, err)
	} else if c != nil {
		c.Close()
	}
	assertClosed(t, v6)
	for _, p := range portsOf(t, d, id).Ports {
		switch {
		case p.HostIP == "::1" && p.HostPort == pp:
			if p.State != "unpublished" || !strings.Contains(p.Error, "ip_unprivileged_port_start") {
				t.Errorf("the unmarked record of [::1]:%d after a restart: %+v, want unpublished", pp, p)
			}
		case p.State != "published":
			t.Errorf("port %+v after a restart, want published", p)
		}
	}
}
