package network

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/miekg/dns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// fixedBlocked is the part of the always-blocked set that does not depend
// on the host: addresses that are never a destination on the internet,
// and cloud metadata and platform services outside 169.254.0.0/16.
var fixedBlocked = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),          // "this network"
	netip.MustParsePrefix("127.0.0.0/8"),        // loopback
	netip.MustParsePrefix("169.254.0.0/16"),     // link-local: metadata of most clouds (169.254.169.254, 169.254.0.23, ...)
	netip.MustParsePrefix("192.0.0.0/24"),       // IETF protocol assignments (192.0.0.192: Oracle Cloud Classic metadata)
	netip.MustParsePrefix("224.0.0.0/4"),        // multicast
	netip.MustParsePrefix("240.0.0.0/4"),        // reserved, and the limited broadcast 255.255.255.255
	netip.MustParsePrefix("100.100.100.200/32"), // Alibaba Cloud metadata
	netip.MustParsePrefix("168.63.129.16/32"),   // Azure wireserver (platform DNS, DHCP, agent)
}

// fixedBlocked6 is the IPv6 part of the always-blocked set that does not
// depend on the host. The prefixes that carry an IPv4 address inside
// (mapped, NAT64, 6to4, Teredo) are blocked whole: through a translator
// or relay they would reach IPv4 destinations past the IPv4 set.
var fixedBlocked6 = []netip.Prefix{
	netip.MustParsePrefix("::/128"),         // unspecified: the host itself
	netip.MustParsePrefix("::1/128"),        // loopback
	netip.MustParsePrefix("::ffff:0:0/96"),  // IPv4-mapped
	netip.MustParsePrefix("64:ff9b::/96"),   // NAT64, well-known prefix
	netip.MustParsePrefix("64:ff9b:1::/48"), // NAT64, local use
	netip.MustParsePrefix("100::/64"),       // discard
	netip.MustParsePrefix("2001::/32"),      // Teredo
	netip.MustParsePrefix("2002::/16"),      // 6to4
	netip.MustParsePrefix("fc00::/7"),       // unique local (ULA): private networks, and cloud metadata (fd00:ec2::254)
	netip.MustParsePrefix("fe80::/10"),      // link-local
	netip.MustParsePrefix("fec0::/10"),      // site-local (deprecated, still routed by some hosts)
	netip.MustParsePrefix("ff00::/8"),       // multicast
}

// privateRanges are the networks a connected or routed network of the
// host is blocked in: what is there is the host's own infrastructure.
var privateRanges = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"), netip.MustParsePrefix("100.64.0.0/10"),
}

// hostAddr is one address of the host, as netlink lists it.
type hostAddr struct {
	Prefix    netip.Prefix // the address with its prefix length
	Peer      netip.Prefix // the far end of a point-to-point link, if any
	Broadcast netip.Addr   // if set
}

// hostRoute is one route of the host, of any table.
type hostRoute struct {
	Dst  netip.Prefix // 0.0.0.0/0 for a default route
	Type int          // unix.RTN_*
}

// blockedSet is the always-blocked set: fixedBlocked, the bridge's
// subnet (the gateway and the other sandboxes), extra (--block), every
// address of the host and every broadcast address of its connected
// networks, the host's local and broadcast routes, and each connected or
// routed network that lies in a private range (a route to a private
// network; never a default route). With IPv6: fixedBlocked6, subnet6,
// every IPv6 address of the host and the host's local, anycast and
// multicast routes (its private networks are all in fc00::/7 and
// fe80::/10 already). Sorted, without duplicates.
func blockedSet(subnet netip.Prefix, extra []netip.Prefix, addrs []hostAddr, routes []hostRoute, subnet6 ...netip.Prefix) []netip.Prefix {
	out := slices.Concat(fixedBlocked, []netip.Prefix{subnet}, extra, fixedBlocked6)
	for _, s6 := range subnet6 {
		if s6.IsValid() {
			out = append(out, s6)
		}
	}
	for _, a := range addrs {
		if a.Prefix.Addr().Is6() {
			out = append(out, netip.PrefixFrom(a.Prefix.Addr(), 128))
			continue
		}
		out = append(out, netip.PrefixFrom(a.Prefix.Addr(), 32))
		if a.Prefix.Bits() <= 30 {
			out = append(out, netip.PrefixFrom(lastAddr(a.Prefix), 32))
		}
		if a.Broadcast.Is4() {
			out = append(out, netip.PrefixFrom(a.Broadcast, 32))
		}
		for _, n := range []netip.Prefix{a.Prefix.Masked(), a.Peer.Masked()} {
			if n.IsValid() && private(n) {
				out = append(out, n)
			}
		}
	}
	for _, r := range routes {
		if r.Dst.Addr().Is6() {
			switch r.Type {
			case unix.RTN_LOCAL, unix.RTN_ANYCAST, unix.RTN_MULTICAST:
				out = append(out, r.Dst.Masked())
			}
			continue
		}
		switch r.Type {
		case unix.RTN_LOCAL, unix.RTN_BROADCAST, unix.RTN_ANYCAST, unix.RTN_MULTICAST:
			out = append(out, r.Dst.Masked()) // the host's own
		case unix.RTN_UNICAST:
			if r.Dst.Bits() > 0 && private(r.Dst) {
				out = append(out, r.Dst.Masked())
			}
		}
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int {
		if a.Addr().Is6() != b.Addr().Is6() {
			return a.Addr().BitLen() - b.Addr().BitLen()
		}
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	return slices.Compact(out)
}

// private reports whether p lies inside a private range.
func private(p netip.Prefix) bool {
	return slices.ContainsFunc(privateRanges, func(r netip.Prefix) bool {
		return r.Bits() <= p.Bits() && r.Contains(p.Addr())
	})
}

// lastAddr is p's highest address, its broadcast address.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As4()
	for i := p.Bits(); i < 32; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	return netip.AddrFrom4(b)
}

// unicast reports whether a can be one host's address: not unspecified,
// "this network", multicast, reserved or the limited broadcast; an IPv6
// one neither unspecified, multicast, loopback nor IPv4-mapped.
func unicast(a netip.Addr) bool {
	if a.Is6() && !a.Is4In6() {
		return !a.IsUnspecified() && !a.IsMulticast() && !a.IsLoopback()
	}
	a = a.Unmap()
	return a.Is4() && !a.IsUnspecified() && !a.IsMulticast() &&
		!netip.MustParsePrefix("0.0.0.0/8").Contains(a) && !netip.MustParsePrefix("240.0.0.0/4").Contains(a)
}

// ParseBlock reads one --block value: a CIDR or an address (IPv4 or IPv6).
func ParseBlock(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		a, aerr := netip.ParseAddr(s)
		if aerr != nil {
			return netip.Prefix{}, fmt.Errorf("%q is neither a CIDR nor an address", s)
		}
		if a.Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("%q: an address with a zone: write it with no zone", s)
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	if p.Addr().Is4In6() || p.Addr().Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("%q: write an IPv4 network as IPv4, and no zone", s)
	}
	if p.Masked() != p {
		return netip.Prefix{}, fmt.Errorf("%q has host bits set (did you mean %s?)", s, p.Masked())
	}
	return p, nil
}

// readHost lists the host's addresses and routes (every table; IPv4, and
// IPv6 too with v6). A dump that changed while it was read is read again.
func readHost(v6 bool) ([]hostAddr, []hostRoute, error) {
	var err error
	fam := netlink.FAMILY_V4
	if v6 {
		fam = netlink.FAMILY_ALL
	}
	for range 5 {
		var as []hostAddr
		var rs []hostRoute
		if as, rs, err = readHostOnce(fam); err == nil {
			return as, rs, nil
		}
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			break
		}
	}
	return nil, nil, fmt.Errorf("network: host addresses and routes: %w", err)
}

func readHostOnce(fam int) ([]hostAddr, []hostRoute, error) {
	nas, err := netlink.AddrList(nil, fam)
	if err != nil {
		return nil, nil, err
	}
	var as []hostAddr
	for _, na := range nas {
		a := hostAddr{Prefix: ipNetPrefix(na.IPNet), Peer: ipNetPrefix(na.Peer)}
		if b, ok := netip.AddrFromSlice(na.Broadcast.To4()); ok && na.Broadcast.To4() != nil {
			a.Broadcast = b
		}
		if a.Prefix.IsValid() {
			as = append(as, a)
		}
	}
	nrs, err := netlink.RouteListFiltered(fam, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, nil, err
	}
	var rs []hostRoute
	for _, nr := range nrs {
		dst := ipNetPrefix(nr.Dst)
		if !dst.IsValid() && nr.Family == netlink.FAMILY_V6 {
			dst = netip.MustParsePrefix("::/0")
		} else if !dst.IsValid() {
			dst = netip.MustParsePrefix("0.0.0.0/0")
		}
		rs = append(rs, hostRoute{Dst: dst, Type: nr.Type})
	}
	return as, rs, nil
}

// ipNetPrefix is n as an IPv4 or IPv6 prefix, or the zero Prefix.
func ipNetPrefix(n *net.IPNet) netip.Prefix {
	if n == nil {
		return netip.Prefix{}
	}
	ones, bits := n.Mask.Size()
	if ip4 := n.IP.To4(); ip4 != nil && bits == 32 {
		a, _ := netip.AddrFromSlice(ip4)
		return netip.PrefixFrom(a, ones)
	}
	if a, ok := netip.AddrFromSlice(n.IP); ok && len(n.IP) == 16 && bits == 128 {
		return netip.PrefixFrom(a, ones)
	}
	return netip.Prefix{}
}

// blocked is the always-blocked set of the host as it is now.
func (m *Manager) blocked() ([]netip.Prefix, error) {
	as, rs, err := readHost(m.cfg.Subnet6.IsValid())
	if err != nil {
		return nil, err
	}
	return blockedSet(m.cfg.Subnet, m.cfg.Block, as, rs, m.cfg.Subnet6), nil
}

// isBlocked reports whether a is in the always-blocked set last written.
func (m *Manager) isBlocked(a netip.Addr) bool {
	p := m.blockedNow.Load()
	return p == nil || slices.ContainsFunc(*p, func(b netip.Prefix) bool { return b.Contains(a) })
}

// refreshBlocked writes the always-blocked set again if the host changed.
func (m *Manager) refreshBlocked() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	set, err := m.blocked()
	if err != nil {
		return err
	}
	if old := m.blockedNow.Load(); old != nil && slices.Equal(*old, set) {
		return nil
	}
	if err := m.fw.setBlocked(set); err != nil {
		return err
	}
	m.blockedNow.Store(&set)
	m.log.Debug("network: always-blocked set refreshed", "prefixes", len(set))
	return nil
}

// screenAnswer removes from up's answer section the A (and AAAA) records
// a sandbox with allowlist allow must not be handed: non-unicast
// addresses, and addresses in the always-blocked set unless one of its
// CIDR entries names them; without v6 every AAAA record. It returns the
// addresses to admit (never a blocked one: a CIDR entry lets those
// through on its own terms) and the shortest TTL among them.
func (m *Manager) screenAnswer(allow []Dest, up *dns.Msg, v6 bool) ([]netip.Addr, time.Duration) {
	var addrs []netip.Addr
	ttl := maxAdmit
	up.Answer = slices.DeleteFunc(up.Answer, func(rr dns.RR) bool {
		var ip netip.Addr
		switch r := rr.(type) {
		case *dns.A:
			a, ok := netip.AddrFromSlice(r.A.To4())
			if !ok || r.A.To4() == nil {
				return true
			}
			ip = a
		case *dns.AAAA:
			a, ok := netip.AddrFromSlice(r.AAAA)
			if !ok || !v6 || len(r.AAAA) != 16 || a.Is4In6() {
				return true
			}
			ip = a
		default:
			return false
		}
		if !unicast(ip) {
			return true
		}
		if m.isBlocked(ip) {
			return !slices.ContainsFunc(allow, func(d Dest) bool { return d.IsCIDR() && d.Prefix.Contains(ip) })
		}
		addrs = append(addrs, ip)
		ttl = min(ttl, time.Duration(rr.Header().Ttl)*time.Second)
		return false
	})
	return addrs, ttl
}
