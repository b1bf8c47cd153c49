package network

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// inSet reports whether a is in the set, as the kernel's interval set
// built from it would say.
func inSet(set []netip.Prefix, a string) bool {
	return slices.ContainsFunc(set, func(p netip.Prefix) bool { return p.Contains(netip.MustParseAddr(a)) })
}

func TestBlockedSet(t *testing.T) {
	addrs := []hostAddr{
		{Prefix: pfx("192.168.1.10/24"), Broadcast: netip.MustParseAddr("192.168.1.255")}, // private LAN
		{Prefix: pfx("203.0.113.5/24")},                                                  // public, no broadcast attribute
		{Prefix: pfx("10.8.0.1/32"), Peer: pfx("10.8.0.2/32")},                           // point-to-point (a VPN)
		{Prefix: pfx("198.51.100.7/31")},                                                 // /31: no broadcast address
		{Prefix: pfx("127.0.0.1/8")},                                                     // lo
		{Prefix: pfx("10.213.0.1/16"), Broadcast: netip.MustParseAddr("10.213.255.255")}, // the bridge
	}
	routes := []hostRoute{
		{Dst: pfx("0.0.0.0/0"), Type: unix.RTN_UNICAST},         // default: never blocks a private range
		{Dst: pfx("172.20.0.0/16"), Type: unix.RTN_UNICAST},     // a routed private network
		{Dst: pfx("100.64.0.0/10"), Type: unix.RTN_UNICAST},     // a VPN's shared address space
		{Dst: pfx("0.0.0.0/1"), Type: unix.RTN_UNICAST},         // a VPN's half default: not a private network
		{Dst: pfx("198.18.0.0/15"), Type: unix.RTN_UNICAST},     // routed, public: reachable
		{Dst: pfx("198.18.7.255/32"), Type: unix.RTN_BROADCAST}, // the host's own
		{Dst: pfx("198.18.9.9/32"), Type: unix.RTN_LOCAL},
		{Dst: pfx("10.99.0.0/16"), Type: unix.RTN_BLACKHOLE}, // nothing there to reach
	}
	set := blockedSet(pfx("10.213.0.0/16"), []netip.Prefix{pfx("198.19.0.0/24")}, addrs, routes)

	blocked := []string{
		// Fixed.
		"0.0.0.0", "127.0.0.1", "169.254.169.254", "169.254.0.23", "224.0.0.1", "239.255.255.250",
		"240.0.0.1", "255.255.255.255", "100.100.100.200", "168.63.129.16", "192.0.0.192",
		// The bridge (gateway, other sandboxes) and --block.
		"10.213.0.1", "10.213.7.7", "198.19.0.9",
		// The host's addresses, their private networks and broadcasts.
		"192.168.1.10", "192.168.1.77", "192.168.1.255", "203.0.113.5", "203.0.113.255",
		"10.8.0.1", "10.8.0.2", "198.51.100.7",
		// Routes: private, and the host's own.
		"172.20.3.4", "100.64.1.1", "100.127.255.255", "198.18.7.255", "198.18.9.9",
	}
	reachable := []string{
		"203.0.113.6",  // a public connected network: only the host's address is blocked
		"198.51.100.6", // the other end of a public /31
		"10.99.0.1",    // a blackhole route
		"10.8.0.3",     // beside the VPN's peer
		"172.21.0.1",   // a private network the host has no route of its own to
		"198.18.0.2", "8.8.8.8", "1.1.1.1",
	}
	for _, a := range blocked {
		if !inSet(set, a) {
			t.Errorf("%s is not blocked", a)
		}
	}
	for _, a := range reachable {
		if inSet(set, a) {
			t.Errorf("%s is blocked", a)
		}
	}
	if !slices.IsSortedFunc(set, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) }) {
		t.Errorf("set not sorted: %v", set)
	}
	// The same host gives the same set: refreshes compare sets.
	if again := blockedSet(pfx("10.213.0.0/16"), []netip.Prefix{pfx("198.19.0.0/24")}, slices.Clone(addrs), routes); !slices.Equal(set, again) {
		t.Errorf("set differs for the same host:\n%v\n%v", set, again)
	}
	// And it fits an interval set.
	if len(intervalElements(set, false)) == 0 {
		t.Errorf("no interval elements")
	}
}

func TestLastAddr(t *testing.T) {
	for in, want := range map[string]string{
		"192.168.1.10/24": "192.168.1.255", "10.0.0.0/8": "10.255.255.255",
		"172.16.5.4/30": "172.16.5.7", "0.0.0.0/0": "255.255.255.255", "1.2.3.4/32": "1.2.3.4",
	} {
		if got := lastAddr(pfx(in)).String(); got != want {
			t.Errorf("lastAddr(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestUnicast(t *testing.T) {
	for a, want := range map[string]bool{
		"198.18.0.2": true, "10.1.2.3": true, "255.255.255.255": false, "224.0.0.251": false,
		"239.1.2.3": false, "240.0.0.1": false, "0.0.0.0": false, "0.1.2.3": false, "::1": false,
	} {
		if got := unicast(netip.MustParseAddr(a)); got != want {
			t.Errorf("unicast(%s) = %v, want %v", a, got, want)
		}
	}
}

func TestParseBlock(t *testing.T) {
	for in, want := range map[string]string{"10.0.0.0/8": "10.0.0.0/8", "192.0.2.7": "192.0.2.7/32",
		"fd00:ec2::254": "fd00:ec2::254/128", "2001:db8::/32": "2001:db8::/32"} {
		if got, err := ParseBlock(in); err != nil || got.String() != want {
			t.Errorf("ParseBlock(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
	for in, msg := range map[string]string{
		"10.1.0.0/8": "host bits", "fd00::/7": "host bits", "::ffff:10.0.0.1": "as IPv4", "fe80::1%eth0": "no zone", "example.org": "neither", "": "neither",
	} {
		if _, err := ParseBlock(in); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("ParseBlock(%q) error = %v, want one saying %q", in, err, msg)
		}
	}
}

func TestScreenAnswer(t *testing.T) {
	m := &Manager{}
	set := blockedSet(pfx("10.213.0.0/24"), nil, []hostAddr{{Prefix: pfx("10.77.0.1/24")}}, nil)
	a := func(ip string, ttl uint32) dns.RR {
		return &dns.A{Hdr: dns.RR_Header{Name: "x.test.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl}, A: net.ParseIP(ip)}
	}
	answer := func() *dns.Msg {
		return &dns.Msg{Answer: []dns.RR{
			&dns.CNAME{Hdr: dns.RR_Header{Name: "y.test.", Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: 5}, Target: "x.test."},
			a("198.18.0.2", 300), a("255.255.255.255", 60), a("224.0.0.1", 60), a("169.254.169.254", 60),
			a("10.77.0.9", 60), a("198.18.1.2", 120), a("240.1.2.3", 60), a("10.213.0.1", 60),
		}}
	}
	kept := func(up *dns.Msg) []string {
		var out []string
		for _, rr := range up.Answer {
			if x, ok := rr.(*dns.A); ok {
				out = append(out, x.A.String())
			}
		}
		return out
	}

	// Before any set is written nothing is admitted.
	up := answer()
	if addrs, _ := m.screenAnswer(nil, up, false); len(addrs) != 0 {
		t.Errorf("admitted %v with no set yet", addrs)
	}

	m.blockedNow.Store(&set)
	up = answer()
	addrs, ttl := m.screenAnswer(nil, up, false)
	if got := strings.Join(kept(up), ","); got != "198.18.0.2,198.18.1.2" {
		t.Errorf("answer keeps %s", got)
	}
	if len(up.Answer) != 3 { // the CNAME stays
		t.Errorf("answer has %d records, want the CNAME and two A", len(up.Answer))
	}
	if fmt.Sprint(addrs) != "[198.18.0.2 198.18.1.2]" || ttl.Seconds() != 120 {
		t.Errorf("admitted %v for %v, want 198.18.0.2 and 198.18.1.2 for 120s", addrs, ttl)
	}

	// A CIDR entry keeps its blocked addresses in the answer, without
	// admitting them (the CIDR's own rule lets them through); never a
	// non-unicast one.
	allow := []Dest{{Prefix: pfx("10.77.0.0/24")}, {Prefix: pfx("224.0.0.0/4")}, {Name: "x.test"}}
	up = answer()
	addrs, _ = m.screenAnswer(allow, up, false)
	if got := strings.Join(kept(up), ","); got != "198.18.0.2,10.77.0.9,198.18.1.2" {
		t.Errorf("answer with CIDR entries keeps %s", got)
	}
	if slices.Contains(addrs, netip.MustParseAddr("10.77.0.9")) {
		t.Errorf("admitted 10.77.0.9, a blocked address named by a CIDR entry")
	}

	// AAAA records: only for a sandbox with IPv6, and never a ULA,
	// link-local, mapped, NAT64, multicast or the bridge's own.
	set6 := blockedSet(pfx("10.213.0.0/24"), nil, nil, nil, pfx("fd62::/64"))
	m.blockedNow.Store(&set6)
	aaaa := func(ip string) dns.RR {
		return &dns.AAAA{Hdr: dns.RR_Header{Name: "x.test.", Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: 90}, AAAA: net.ParseIP(ip)}
	}
	answer6 := func() *dns.Msg {
		return &dns.Msg{Answer: []dns.RR{aaaa("2001:2::2"), aaaa("fd00:ec2::254"), aaaa("fe80::1"), aaaa("::ffff:169.254.169.254"),
			aaaa("64:ff9b::a9fe:a9fe"), aaaa("ff02::1"), aaaa("fd62::1"), aaaa("::1"), a("198.18.0.2", 300)}}
	}
	up = answer6()
	addrs, ttl = m.screenAnswer(nil, up, true)
	if fmt.Sprint(addrs) != "[2001:2::2 198.18.0.2]" || len(up.Answer) != 2 || ttl.Seconds() != 90 {
		t.Errorf("with IPv6: admitted %v for %v, answer %v", addrs, ttl, up.Answer)
	}
	up = answer6()
	if addrs, _ = m.screenAnswer(nil, up, false); fmt.Sprint(addrs) != "[198.18.0.2]" || len(up.Answer) != 1 {
		t.Errorf("without IPv6: admitted %v, answer %v", addrs, up.Answer)
	}
}

func TestRouteMatters(t *testing.T) {
	_, six, _ := net.ParseCIDR("2001:2::/64")
	if !routeMatters(netlink.Route{Family: netlink.FAMILY_V6, Type: unix.RTN_LOCAL}, true) ||
		routeMatters(netlink.Route{Family: netlink.FAMILY_V6, Dst: six, Type: unix.RTN_UNICAST}, true) {
		t.Errorf("with IPv6: a local IPv6 route must matter, a unicast one not")
	}
	_, private, _ := net.ParseCIDR("10.77.3.0/24")
	_, public, _ := net.ParseCIDR("198.18.5.0/24")
	for _, c := range []struct {
		r    netlink.Route
		want bool
	}{
		{netlink.Route{Family: netlink.FAMILY_V4, Dst: private, Type: unix.RTN_UNICAST}, true},
		{netlink.Route{Family: netlink.FAMILY_V4, Dst: public, Type: unix.RTN_UNICAST}, false},
		{netlink.Route{Family: netlink.FAMILY_V4, Dst: nil, Type: unix.RTN_UNICAST}, false},
		{netlink.Route{Family: netlink.FAMILY_V4, Dst: public, Type: unix.RTN_LOCAL}, true},
		{netlink.Route{Family: netlink.FAMILY_V6, Type: unix.RTN_LOCAL}, false},
	} {
		if got := routeMatters(c.r, false); got != c.want {
			t.Errorf("routeMatters(%v type %d) = %v, want %v", c.r.Dst, c.r.Type, got, c.want)
		}
	}
}
