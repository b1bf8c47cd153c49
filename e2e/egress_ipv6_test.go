//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
)

// The IPv6 test hosts: the benchmarking prefix 2001:2::/48 (outside the
// always-blocked set), beside the IPv4 ones of egressNet, and a ULA
// address on H1 standing for a cloud's IPv6 metadata server.
const (
	h1Addr6     = "2001:2::2"
	h2Addr6     = "2001:2:0:1::2"
	ulaAddr     = "fd00:ec2::254"
	testSubnet6 = "fd62:6f78:6400::/64"
)

// testNames6 is what the test's upstream DNS server answers AAAA with.
var testNames6 = map[string]string{
	"v6.test.":   h1Addr6,
	"h2v6.test.": h2Addr6,
	"ula.test.":  ulaAddr,
}

// addIPv6 gives the test's namespaces IPv6: B 2001:2::1 and 2001:2:0:1::1,
// H1 2001:2::2 (HTTP) and fd00:ec2::254 (HTTP, the "metadata"), H2
// 2001:2:0:1::2 (HTTP); B routes everything else to H1 and forwards IPv6
// (only B: the host's settings are untouched).
func (e *egressNet) addIPv6(t *testing.T) {
	ipCmd(t, "-n", e.b, "addr", "add", "2001:2::1/64", "dev", e.tag+"b1", "nodad")
	ipCmd(t, "-n", e.h1, "addr", "add", h1Addr6+"/64", "dev", e.tag+"h1", "nodad")
	ipCmd(t, "-n", e.b, "addr", "add", "2001:2:0:1::1/64", "dev", e.tag+"b2", "nodad")
	ipCmd(t, "-n", e.h2, "addr", "add", h2Addr6+"/64", "dev", e.tag+"h2", "nodad")
	ipCmd(t, "-n", e.h1, "addr", "add", ulaAddr+"/128", "dev", "lo")
	ipCmd(t, "-n", e.b, "-6", "route", "add", "default", "via", h1Addr6)
	ipCmd(t, "-n", e.b, "-6", "route", "add", ulaAddr+"/128", "via", h1Addr6)
	inNetns(t, e.b, func() {
		must(t, os.WriteFile("/proc/sys/net/ipv6/conf/all/forwarding", []byte("1"), 0))
	})
	serve6 := func(addr, body string) {
		ln, err := net.Listen("tcp6", addr)
		if err != nil {
			t.Fatalf("listen %s: %v", addr, err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, body) })}
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { _ = srv.Close() })
	}
	inNetns(t, e.h1, func() {
		serve6("["+h1Addr6+"]:80", "h1v6")
		serve6("["+ulaAddr+"]:80", "ula")
	})
	inNetns(t, e.h2, func() { serve6("["+h2Addr6+"]:80", "h2v6") })
}

// fetch6 GETs http://[addr]:80/ from sandbox id; ok reports an answer.
func (e *egressNet) fetch6(id, addr string) (string, bool) {
	out, _, code := e.boxctl("exec", "--timeout", "10s", id, "--", "sh", "-c",
		`printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 3 "$0" 80`, addr)
	head, body, found := strings.Cut(out, "\r\n\r\n")
	return body, code == 0 && found && strings.HasPrefix(head, "HTTP/1.0 200")
}

func (e *egressNet) reaches6(t *testing.T, id, addr, body string) {
	t.Helper()
	if out, ok := e.fetch6(id, addr); !ok || out != body {
		t.Errorf("sandbox %s: GET [%s]:80 = %q (ok %v), want %q", id, addr, out, ok, body)
	}
}

func (e *egressNet) refused6(t *testing.T, id, addr string) {
	t.Helper()
	if out, ok := e.fetch6(id, addr); ok {
		t.Errorf("sandbox %s: GET [%s]:80 = %q, want it refused", id, addr, out)
	}
}

// lookup6 is name's AAAA answer in sandbox id.
func (e *egressNet) lookup6(t *testing.T, id, name string) []string {
	t.Helper()
	var out []string
	for _, a := range e.lookupType(t, id, name, "aaaa") {
		if strings.Contains(a, ":") {
			out = append(out, a)
		}
	}
	return out
}

func (e *egressNet) lookupType(t *testing.T, id, name, typ string) []string {
	t.Helper()
	out, _, _ := e.boxctl("exec", "--timeout", "20s", id, "--", "nslookup", "-type="+typ, "-timeout=3", "-retry=1", name)
	var addrs []string
	_, answer, _ := strings.Cut(out, "Name:")
	for _, l := range strings.Split(answer, "\n") {
		if a, ok := strings.CutPrefix(strings.TrimSpace(l), "Address:"); ok {
			addrs = append(addrs, strings.TrimSpace(a))
		}
	}
	return addrs
}

// TestEgressIPv6: with --bridge-subnet6 an egress sandbox reaches IPv6
// destinations by the same allowlist rules as IPv4 ones (names through
// AAAA answers, CIDRs, '*'), NATed to B's address; the IPv6
// always-blocked set (a ULA "metadata" address here) stays refused
// under '*' and through names, and appears in the deny log.
func TestEgressIPv6(t *testing.T) {
	e := newEgressNet(t)
	e.addIPv6(t)
	e.start(t, "--bridge-subnet6", testSubnet6)
	t.Cleanup(func() { e.stop(t, syscall.SIGTERM) })
	e.must(t, "image", "import", "--rootfs", env.busybox, "--name", testImage)
	var ids []string
	create := func(t *testing.T, allow ...string) string {
		id := e.create(t, allow...)
		ids = append(ids, id)
		return id
	}

	t.Run("Names", func(t *testing.T) {
		id := create(t, "v6.test:80", "ula.test")
		var sb struct {
			Network struct {
				Address6 string `json:"address6"`
			} `json:"network"`
		}
		must(t, json.Unmarshal([]byte(e.must(t, "inspect", id)), &sb))
		if !strings.HasPrefix(sb.Network.Address6, "fd62:6f78:6400::") {
			t.Errorf("inspect network.address6 = %q", sb.Network.Address6)
		}
		e.refused6(t, id, h1Addr6) // not looked up yet
		if got := e.lookup6(t, id, "v6.test"); strings.Join(got, ",") != h1Addr6 {
			t.Fatalf("v6.test AAAA = %v, want %s", got, h1Addr6)
		}
		e.reaches6(t, id, h1Addr6, "h1v6")
		e.refused6(t, id, h2Addr6)
		// An allowed name pointing at a ULA gains nothing.
		if got := e.lookup6(t, id, "ula.test"); len(got) != 0 {
			t.Errorf("ula.test AAAA = %v", got)
		}
		e.refused6(t, id, ulaAddr)
		// Allowed live by CIDR, as an IPv4 one would be.
		e.must(t, "network", "allow", id, "[2001:2:0:1::/64]:80")
		e.reaches6(t, id, h2Addr6, "h2v6")
	})

	t.Run("OpenEgress", func(t *testing.T) {
		id := create(t, "*")
		e.reaches6(t, id, h1Addr6, "h1v6")
		e.reaches6(t, id, h2Addr6, "h2v6")
		e.reaches(t, id, "http://"+h1Addr+"/", "h1")
		// The ULA is always blocked: '*' does not open it...
		e.refused6(t, id, ulaAddr)
		// ...and the refusal is in the deny log.
		if _, n := findDenial(e.denials(t, id), ulaAddr, 80, "tcp", "blocked"); n == 0 {
			t.Errorf("the refused ULA is not in the deny log: %+v", e.denials(t, id))
		}
		// Nor does the host's own IPv6 address, nor link-local.
		e.refused6(t, id, "2001:2::1")
		// A CIDR entry naming it does.
		other := create(t, "fd00:ec2::254")
		e.reaches6(t, other, ulaAddr, "ula")
	})

	for _, id := range ids {
		e.must(t, "rm", "-f", id)
	}
	e.clean(t, "after delete")
}
