//go:build linux

package e2e

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/boxd-dev/boxd/internal/testenv"
)

// The egress tests never send a packet off this machine. They build this
// topology out of network namespaces they own, on the benchmarking range
// 198.18.0.0/15 (and one private network, to show the host's own private
// networks are blocked):
//
//	[sandboxes] ─ boxd bridge ─ B (a second boxd, ip_forward=1 only here)
//	                              ├─ veth 198.18.0.1/24 ── H1 198.18.0.2 (HTTP :80 :8080, DNS :53)
//	                              │                           + 169.254.169.254 (a fake metadata server)
//	                              └─ veth 198.18.1.1/24 ── H2 198.18.1.2 (HTTP :80)
//	                                      10.77.0.1/24           10.77.0.2
//
// B's default route points at H1, so "anything" stays inside the
// namespaces. containerd stays in the host namespace; only boxd (and the
// CNI plugins it runs, which act on the namespace of their caller) runs in
// B, entered with nsenter --net (no private mount namespace, so the
// sandbox namespaces it pins are visible to runc).
type egressNet struct {
	tag       string // short unique prefix of names
	b, h1, h2 string // netns names under /run/netns
	dir       string
	socket    string
	stateDir  string
	log       string
	daemon    *exec.Cmd
	namespace string
	beside    *beside // the second instance BOXD_E2E_BESIDE starts (instance_test.go)
	// besideName, if set, is the instance started beside this boxd when
	// BOXD_E2E_BESIDE does not name one.
	besideName string
}

const (
	h1Addr   = "198.18.0.2"
	h2Addr   = "198.18.1.2"
	bAddr    = "198.18.0.1"
	privAddr = "10.77.0.2"
	metaAddr = "169.254.169.254"
)

func ipCmd(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

func newEgressNet(t *testing.T) *egressNet {
	tag := fmt.Sprintf("bxe%d", os.Getpid()%100000)
	// A containerd namespace per test: each test's boxd imports the image
	// into its own, so the tests do not see each other's.
	ns := namespace + "-" + strings.ToLower(strings.TrimPrefix(t.Name(), "Test"))
	e := &egressNet{tag: tag, b: tag + "-b", h1: tag + "-h1", h2: tag + "-h2", dir: t.TempDir(), namespace: ns}
	e.socket = filepath.Join(e.dir, "boxd.sock")
	e.stateDir = filepath.Join(e.dir, "state")
	e.log = filepath.Join(e.dir, "boxd.log")
	for _, ns := range []string{e.b, e.h1, e.h2} {
		ipCmd(t, "netns", "add", ns)
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
		ipCmd(t, "-n", ns, "link", "set", "lo", "up")
	}
	link := func(peer, bName, pName, bIP, pIP string) {
		ipCmd(t, "link", "add", bName, "type", "veth", "peer", "name", pName)
		ipCmd(t, "link", "set", bName, "netns", e.b)
		ipCmd(t, "link", "set", pName, "netns", peer)
		ipCmd(t, "-n", e.b, "addr", "add", bIP+"/24", "dev", bName)
		ipCmd(t, "-n", peer, "addr", "add", pIP+"/24", "dev", pName)
		ipCmd(t, "-n", e.b, "link", "set", bName, "up")
		ipCmd(t, "-n", peer, "link", "set", pName, "up")
	}
	link(e.h1, tag+"b1", tag+"h1", bAddr, h1Addr)
	link(e.h2, tag+"b2", tag+"h2", "198.18.1.1", h2Addr)
	ipCmd(t, "-n", e.b, "addr", "add", "10.77.0.1/24", "dev", tag+"b2")
	ipCmd(t, "-n", e.h2, "addr", "add", privAddr+"/24", "dev", tag+"h2")
	ipCmd(t, "-n", e.h1, "addr", "add", metaAddr+"/32", "dev", "lo")
	ipCmd(t, "-n", e.b, "route", "add", "default", "via", h1Addr)
	ipCmd(t, "-n", e.b, "route", "add", metaAddr+"/32", "via", h1Addr)
	// Replies to the NATed sandboxes come back to B's addresses; H1 needs
	// no route of its own beyond its link.
	e.setForward(t, true)

	inNetns(t, e.h1, func() {
		serveHTTP(t, h1Addr+":80", "h1")
		serveHTTP(t, h1Addr+":8080", "h1-8080")
		serveHTTP(t, metaAddr+":80", "metadata")
		serveDNS(t, h1Addr+":53")
	})
	inNetns(t, e.h2, func() { serveHTTP(t, "0.0.0.0:80", "h2") })
	inNetns(t, e.b, func() { serveHTTP(t, "0.0.0.0:8081", "boxd-host") })
	return e
}

// setForward sets ip_forward inside B (never on the host).
func (e *egressNet) setForward(t *testing.T, on bool) {
	t.Helper()
	v := "0"
	if on {
		v = "1"
	}
	inNetns(t, e.b, func() {
		must(t, os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte(v), 0))
	})
}

// inNetns runs f on a thread in netns name. Sockets f opens stay there.
func inNetns(t *testing.T, name string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			t.Error(err)
			return
		}
		defer orig.Close()
		target, err := os.Open("/run/netns/" + name)
		if err != nil {
			t.Error(err)
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			t.Error(err)
			return
		}
		f()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err == nil {
			runtime.UnlockOSThread() // back home: the thread may be reused
		}
	}()
	<-done
}

// testNames is what the test's upstream DNS server in H1 knows.
var testNames = map[string]string{
	"allowed.test.":  h1Addr,
	"denied.test.":   h2Addr,
	"a.wild.test.":   h2Addr,
	"metadata.test.": metaAddr, // an allowed name pointing at a blocked address
	"boxdhost.test.": bAddr,
	"evil.test.":     "255.255.255.255", // non-unicast answers
	"mcast.test.":    "224.0.0.1",
}

func serveDNS(t *testing.T, addr string) {
	pc, err := net.ListenPacket("udp4", addr)
	if err != nil {
		t.Fatalf("listen %s: %v", addr, err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		ip, ok := testNames[strings.ToLower(q.Question[0].Name)]
		ip6, ok6 := testNames6[strings.ToLower(q.Question[0].Name)]
		switch {
		case !ok && !ok6:
			m.Rcode = dns.RcodeNameError
		case q.Question[0].Qtype == dns.TypeA && ok:
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.ParseIP(ip)})
		case q.Question[0].Qtype == dns.TypeAAAA && ok6:
			m.Answer = append(m.Answer, &dns.AAAA{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: 60}, AAAA: net.ParseIP(ip6)})
		}
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
}

// lookup resolves name in sandbox id with busybox's nslookup (its own DNS
// client, which reads resolv.conf); it returns the answer's addresses.
func (e *egressNet) lookup(t *testing.T, id, name string, server ...string) []string {
	t.Helper()
	out, _, _ := e.boxctl(append([]string{"exec", "--timeout", "20s", id, "--", "nslookup", "-timeout=3", "-retry=1", name}, server...)...)
	var addrs []string
	_, answer, _ := strings.Cut(out, "Name:")
	for _, l := range strings.Split(answer, "\n") {
		if a, ok := strings.CutPrefix(strings.TrimSpace(l), "Address:"); ok {
			addrs = append(addrs, strings.TrimSpace(a))
		}
	}
	return addrs
}

func serveHTTP(t *testing.T, addr, body string) {
	ln, err := net.Listen("tcp4", addr)
	if err != nil {
		t.Fatalf("listen %s: %v", addr, err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, body) })}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
}

// start runs the second boxd inside B.
func (e *egressNet) start(t *testing.T, extra ...string) {
	t.Helper()
	logf, err := os.OpenFile(e.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	must(t, err)
	defer logf.Close()
	args := append([]string{"--net=/run/netns/" + e.b, "--", env.boxd,
		"--socket", e.socket, "--containerd", env.ctrd.Address, "--namespace", e.namespace,
		"--state-dir", e.stateDir, "--default-image", testImage, "--init-binary", env.initBin,
		"--runc", testenv.Runc, "--expiry-interval", "300ms", "--bridge", "boxdt0",
		"--bridge-subnet", "10.213.0.0/24", "--dns-upstream", h1Addr + ":53", "--debug", "--warm-pool", "0"}, extra...)
	cmd := exec.Command("nsenter", args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	must(t, cmd.Start())
	e.daemon = cmd
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("unix", e.socket); err == nil {
			c.Close()
			name := os.Getenv(besideEnv)
			if name == "" {
				name = e.besideName
			}
			if name != "" && e.beside == nil {
				e.beside = startBeside(t, e, name)
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("boxd in %s did not start:\n%s", e.b, tail(e.log))
}

func (e *egressNet) stop(t *testing.T, sig syscall.Signal) {
	if e.daemon == nil {
		return
	}
	_ = e.daemon.Process.Signal(sig)
	_, _ = e.daemon.Process.Wait()
	e.daemon = nil
}

func (e *egressNet) boxctl(args ...string) (string, string, int) { return boxctlAt(e.socket, args...) }

func (e *egressNet) must(t *testing.T, args ...string) string {
	t.Helper()
	out, stderr, code := e.boxctl(args...)
	if code != 0 {
		t.Fatalf("boxctl %s: exit %d: %s", strings.Join(args, " "), code, stderr)
	}
	return strings.TrimSpace(out)
}

// create makes an egress sandbox; cleanup deletes it unless the test did.
func (e *egressNet) create(t *testing.T, allow ...string) string {
	t.Helper()
	args := []string{"create", "--memory", "64m", "--network", "egress"}
	for _, a := range allow {
		args = append(args, "--allow", a)
	}
	id := e.must(t, args...)
	t.Cleanup(func() { _, _, _ = e.boxctl("rm", "-f", id) })
	return id
}

// fetch GETs url ("HOST:PORT") from sandbox id with nc (busybox's static
// wget crashes after connecting here); ok reports an HTTP answer, and out
// is its body.
func (e *egressNet) fetch(t *testing.T, id, url string) (string, bool) {
	t.Helper()
	host, port, _ := strings.Cut(strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/"), ":")
	if port == "" {
		port = "80"
	}
	out, _, code := e.boxctl("exec", "--timeout", "10s", id, "--", "sh", "-c",
		`printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 3 "$0" "$1"`, host, port)
	head, body, found := strings.Cut(out, "\r\n\r\n")
	return body, code == 0 && found && strings.HasPrefix(head, "HTTP/1.0 200")
}

func (e *egressNet) reaches(t *testing.T, id, url, body string) {
	t.Helper()
	out, ok := e.fetch(t, id, url)
	if !ok || out != body {
		t.Errorf("sandbox %s: GET %s = %q (ok %v), want %q", id, url, out, ok, body)
	}
}

func (e *egressNet) refused(t *testing.T, id, url string) {
	t.Helper()
	if out, ok := e.fetch(t, id, url); ok {
		t.Errorf("sandbox %s: GET %s = %q, want it refused", id, url, out)
	}
}

// leftovers lists what boxd's network state still holds in B: veths,
// nftables chains and sets of sandboxes, address leases.
func (e *egressNet) leftovers(t *testing.T) []string {
	t.Helper()
	var left []string
	out, err := exec.Command("ip", "-n", e.b, "-o", "link", "show", "type", "veth").CombinedOutput()
	must(t, err)
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l != "" && !strings.Contains(l, e.tag) && (e.beside == nil || !strings.Contains(l, "master "+e.beside.n.Bridge+" ")) {
			left = append(left, "link: "+l)
		}
	}
	nsf, err := os.Open("/run/netns/" + e.b)
	must(t, err)
	defer nsf.Close()
	c, err := nftables.New(nftables.WithNetNSFd(int(nsf.Fd())))
	must(t, err)
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyINet)
	must(t, err)
	for _, ch := range chains {
		if ch.Table.Name == "boxd" && strings.HasPrefix(ch.Name, "sb_") {
			left = append(left, "nft chain: "+ch.Name)
		}
	}
	if tbl, err := c.ListTableOfFamily("boxd", nftables.TableFamilyINet); err == nil {
		sets, err := c.GetSets(tbl)
		must(t, err)
		for _, s := range sets {
			if s.Name != "blocked" && s.Name != "blocked6" {
				left = append(left, "nft set: "+s.Name)
			}
		}
		rules, err := c.GetRules(tbl, &nftables.Chain{Name: "from_sandbox", Table: tbl})
		must(t, err)
		for _, r := range rules {
			if len(r.UserData) > 0 {
				left = append(left, "nft rule: "+string(r.UserData))
			}
		}
	}
	ipam, _ := os.ReadDir(filepath.Join(e.stateDir, "network", "ipam", "boxdt0"))
	for _, f := range ipam {
		if net.ParseIP(f.Name()) != nil {
			left = append(left, "ipam lease: "+f.Name())
		}
	}
	// libcni's cache of results, keyed by network (the bridge's name).
	cache, _ := os.ReadDir("/var/lib/cni/results")
	for _, f := range cache {
		if strings.HasPrefix(f.Name(), "boxdt0-") {
			left = append(left, "cni cache: "+f.Name())
		}
	}
	nsd, _ := os.ReadDir(filepath.Join(e.stateDir, "network", "netns"))
	for _, f := range nsd {
		left = append(left, "netns: "+f.Name())
	}
	return left
}

func (e *egressNet) clean(t *testing.T, when string) {
	t.Helper()
	if left := e.leftovers(t); len(left) > 0 {
		t.Errorf("%s: network state left behind: %v", when, left)
	}
}
