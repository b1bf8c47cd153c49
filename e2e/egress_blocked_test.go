//go:build linux

package e2e

import (
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/nftables"

	"github.com/boxd-dev/boxd/internal/testenv"
)

// TestEgressBlocked attacks the always-blocked set from egress sandboxes
// of a second boxd in the test's own namespaces (see egressNet): UDP to
// the host through broadcast and multicast, directly and through names
// the upstream answers with such addresses, addresses and routes the host
// gains while a sandbox runs, and the admin's --block.
func TestEgressBlocked(t *testing.T) {
	e := newEgressNet(t)
	e.start(t)
	t.Cleanup(func() { e.stop(t, syscall.SIGTERM) })
	e.must(t, "image", "import", "--rootfs", env.busybox, "--name", testImage)
	probe := buildUDPProbe(t)

	// A UDP service of boxd's host on every address, as a host's DHCP,
	// mDNS or NTP daemon would be: it answers every datagram.
	const port = "9999"
	host := listenUDPIn(t, e.b, "0.0.0.0:"+port)
	// The same on a test host, to show the probe works.
	h1 := listenUDPIn(t, e.h1, h1Addr+":"+port)

	t.Run("Broadcast", func(t *testing.T) {
		id := e.create(t, "*")
		e.copyIn(t, probe, id)
		if out, code := e.probe(t, id, h1Addr+":"+port, "star h1"); code != 0 || !h1.saw("star h1") {
			t.Fatalf("UDP to the test host %s: exit %d, %s", h1Addr, code, out)
		}
		for _, to := range []string{
			"255.255.255.255", // limited broadcast
			"198.18.0.255",    // the broadcast of a connected network of the host
			"10.213.0.255",    // the bridge's own broadcast
			"224.0.0.1",       // all hosts: every interface of the host is in it
			"10.213.0.1",      // the gateway, unicast
			"198.18.0.1",      // another address of the host, unicast
			"239.255.255.250", // a multicast group
			"240.0.0.1",       // reserved
		} {
			to += ":" + port
			msg := "star " + to
			out, code := e.probe(t, id, to, msg)
			if code == 0 {
				t.Errorf("UDP to %s from a '*' sandbox got a reply: %s", to, out)
			}
			if host.saw(msg) {
				t.Errorf("UDP to %s from a '*' sandbox reached the host's service on 0.0.0.0:%s", to, port)
			}
		}
	})

	t.Run("Names", func(t *testing.T) {
		id := e.create(t, "evil.test", "mcast.test")
		e.copyIn(t, probe, id)
		for name, addr := range map[string]string{"evil.test": "255.255.255.255", "mcast.test": "224.0.0.1"} {
			// The answer's record is removed: the sandbox learns nothing to
			// send to, and nothing is admitted.
			if got := e.lookup(t, id, name); len(got) != 0 {
				t.Errorf("%s (upstream: %s) resolved to %v; want no address", name, addr, got)
			}
			msg := "name " + name
			if out, code := e.probe(t, id, addr+":"+port, msg); code == 0 {
				t.Errorf("UDP to %s after looking up %s got a reply: %s", addr, name, out)
			}
			if host.saw(msg) {
				t.Errorf("UDP to %s after looking up %s reached the host's service", addr, name)
			}
		}
	})

	t.Run("HostChanges", func(t *testing.T) { e.hostChanges(t) })

	// The admin's --block: H2's network, which '*' reaches otherwise.
	t.Run("BlockFlag", func(t *testing.T) {
		e.stop(t, syscall.SIGTERM)
		e.start(t, "--block", "198.18.1.0/24")
		t.Cleanup(func() {
			e.stop(t, syscall.SIGTERM)
			e.start(t)
		})
		id := e.create(t, "*")
		e.reaches(t, id, "http://"+h1Addr+"/", "h1")
		e.refused(t, id, "http://"+h2Addr+"/")
		// denied.test is H2's address: the record is removed.
		if got := e.lookup(t, id, "denied.test"); len(got) != 0 {
			t.Errorf("denied.test resolved to %v under --block 198.18.1.0/24", got)
		}
		// A CIDR entry still opens it, as for the rest of the set.
		named := e.create(t, "198.18.1.0/24:80")
		e.reaches(t, named, "http://"+h2Addr+"/", "h2")
	})
}

// hostChanges adds an address and a route to boxd's host while a '*'
// sandbox runs; each must be in the always-blocked set within a second
// and close what it covers to the sandbox.
func (e *egressNet) hostChanges(t *testing.T) {
	// Two private networks behind H1, reached through B's default route:
	// not connected, not routed, so a '*' sandbox reaches them.
	const (
		privA = "10.77.2.2" // becomes connected (B gains 10.77.2.1/24)
		privB = "10.77.3.2" // becomes routed (B gains a route to 10.77.3.0/24)
		ownIP = "198.18.3.1"
	)
	for _, a := range []string{privA, privB} {
		ipCmd(t, "-n", e.h1, "addr", "add", a+"/32", "dev", "lo")
	}
	inNetns(t, e.h1, func() {
		serveHTTP(t, privA+":80", "h1-a")
		serveHTTP(t, privB+":80", "h1-b")
	})
	id := e.create(t, "*")
	e.reaches(t, id, "http://"+privA+"/", "h1-a")
	e.reaches(t, id, "http://"+privB+"/", "h1-b")
	e.refused(t, id, "http://"+ownIP+":8081/") // not an address of anyone yet

	// A veth pair of B's own (the kernel here may have no dummy driver).
	link, peer := e.tag+"d0", e.tag+"d1"
	ipCmd(t, "-n", e.b, "link", "add", link, "type", "veth", "peer", "name", peer)
	t.Cleanup(func() { _ = exec.Command("ip", "-n", e.b, "link", "del", link).Run() })
	ipCmd(t, "-n", e.b, "link", "set", peer, "up")
	ipCmd(t, "-n", e.b, "link", "set", link, "up")
	t0 := time.Now()
	ipCmd(t, "-n", e.b, "addr", "add", ownIP+"/24", "dev", link)
	// noprefixroute: B still routes 10.77.2.0/24 to H1, so only the
	// firewall can stop the sandbox.
	ipCmd(t, "-n", e.b, "addr", "add", "10.77.2.1/24", "dev", link, "noprefixroute")
	e.blockedWithin(t, t0, ownIP, "198.18.3.255", "10.77.2.0", privA, "10.77.2.255")
	e.refused(t, id, "http://"+ownIP+":8081/")
	e.refused(t, id, "http://"+privA+"/")

	t0 = time.Now()
	ipCmd(t, "-n", e.b, "route", "add", "10.77.3.0/24", "via", h1Addr)
	e.blockedWithin(t, t0, privB)
	e.refused(t, id, "http://"+privB+"/")

	// And the set shrinks again when they go.
	ipCmd(t, "-n", e.b, "link", "del", link)
	ipCmd(t, "-n", e.b, "route", "del", "10.77.3.0/24")
	deadline := time.Now().Add(time.Second)
	for e.blockedHas(t, privA) || e.blockedHas(t, privB) {
		if time.Now().After(deadline) {
			t.Fatalf("%s or %s still blocked 1 s after the address and route went", privA, privB)
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.reaches(t, id, "http://"+privA+"/", "h1-a")
	e.reaches(t, id, "http://"+privB+"/", "h1-b")
}

// blockedWithin fails unless every addr is in boxd's always-blocked set
// within a second of t0.
func (e *egressNet) blockedWithin(t *testing.T, t0 time.Time, addrs ...string) {
	t.Helper()
	for {
		missing := slices.DeleteFunc(slices.Clone(addrs), func(a string) bool { return e.blockedHas(t, a) })
		if len(missing) == 0 {
			t.Logf("%v blocked %v after the change", addrs, time.Since(t0).Round(time.Millisecond))
			return
		}
		if time.Since(t0) > time.Second {
			t.Errorf("%v not in the always-blocked set 1 s after the host change", missing)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// blockedHas reads boxd's always-blocked set (an interval set) in B.
func (e *egressNet) blockedHas(t *testing.T, addr string) bool {
	t.Helper()
	nsf, err := os.Open("/run/netns/" + e.b)
	must(t, err)
	defer nsf.Close()
	c, err := nftables.New(nftables.WithNetNSFd(int(nsf.Fd())))
	must(t, err)
	tbl := &nftables.Table{Name: "boxd", Family: nftables.TableFamilyINet}
	els, err := c.GetSetElements(&nftables.Set{Table: tbl, Name: "blocked", KeyType: nftables.TypeIPAddr, Interval: true})
	must(t, err)
	a := uint64(binary.BigEndian.Uint32(netip.MustParseAddr(addr).AsSlice()))
	type edge struct {
		at  uint64
		end bool
	}
	var edges []edge
	for _, el := range els {
		edges = append(edges, edge{uint64(binary.BigEndian.Uint32(el.Key)), el.IntervalEnd})
	}
	slices.SortFunc(edges, func(x, y edge) int { return int(x.at) - int(y.at) })
	// The last edge at or below a decides: a start means a is inside.
	in := false
	for _, ed := range edges {
		if ed.at > a {
			break
		}
		in = !ed.end
	}
	return in
}

// probe runs udpprobe in sandbox id; code 0 means a reply came.
func (e *egressNet) probe(t *testing.T, id, to, msg string) (string, int) {
	t.Helper()
	out, stderr, code := e.boxctl("exec", "--timeout", "10s", id, "--", "/tmp/udpprobe", to, msg)
	return strings.TrimSpace(out + stderr), code
}

func (e *egressNet) copyIn(t *testing.T, bin, id string) {
	t.Helper()
	e.must(t, "cp", bin, id+":/tmp/udpprobe")
	e.must(t, "exec", id, "--", "chmod", "755", "/tmp/udpprobe")
}

// buildUDPProbe builds testdata/udpprobe statically.
func buildUDPProbe(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "udpprobe")
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = "/usr/local/go/bin/go"
	}
	cmd := exec.Command(goBin, "build", "-o", bin, "./e2e/testdata/udpprobe")
	cmd.Dir = testenv.RepoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build udpprobe: %v\n%s", err, out)
	}
	return bin
}

// udpService is a UDP listener that answers and remembers every datagram.
type udpService struct {
	mu   sync.Mutex
	seen []string
}

func (s *udpService) saw(msg string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Contains(s.seen, msg)
}

// listenUDPIn runs a udpService on addr in netns ns.
func listenUDPIn(t *testing.T, ns, addr string) *udpService {
	t.Helper()
	var pc net.PacketConn
	var err error
	inNetns(t, ns, func() { pc, err = net.ListenPacket("udp4", addr) })
	if err != nil {
		t.Fatalf("listen udp %s in %s: %v", addr, ns, err)
	}
	t.Cleanup(func() { pc.Close() })
	s := &udpService{}
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			s.mu.Lock()
			s.seen = append(s.seen, string(buf[:n]))
			s.mu.Unlock()
			_, _ = pc.WriteTo(append([]byte("pong "), buf[:n]...), from)
		}
	}()
	return s
}
