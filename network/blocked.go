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

// privateRanges are the networks a connected or routed network of the
// host is blocked in: what is there is the host's own infrastructure.
var privateRanges = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"), netip.MustParsePrefix("100.64.0.0/10"),
}

// hostAddr is one IPv4 address of the host, as netlink lists it.
type hostAddr struct {
	Prefix    netip.Prefix // the address with its prefix length
	Peer      netip.Prefix // the far end of a point-to-point link, if any
	Broadcast netip.Addr   // if set
}

// hostRoute is one IPv4 route of the host, of any table.
type hostRoute struct {
	Dst  netip.Prefix // 0.0.0.0/0 for a default route
	Type int          // unix.RTN_*
}

// blockedSet is the always-blocked set: fixedBlocked, the bridge's
// subnet (the gateway and the other sandboxes), extra (--block), every
// address of the host and every broadcast address of its connected
// networks, the host's local and broadcast routes, and each connected or
// routed network that lies in a private range (a route to a private
// network; never a default route). Sorted, without duplicates.
func blockedSet(subnet netip.Prefix, extra []netip.Prefix, addrs []hostAddr, routes []hostRoute) []netip.Prefix {
	out := slices.Concat(fixedBlocked, []netip.Prefix{subnet}, extra)
	for _, a := range addrs {
		if !a.Prefix.Addr().Is4() {
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
		if !r.Dst.Addr().Is4() {
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
// "this network", multicast, reserved or the limited broadcast.
func unicast(a netip.Addr) bool {
	a = a.Unmap()
	return a.Is4() && !a.IsUnspecified() && !a.IsMulticast() &&
		!netip.MustParsePrefix("0.0.0.0/8").Contains(a) && !netip.MustParsePrefix("240.0.0.0/4").Contains(a)
}

// ParseBlock reads one --block value: an IPv4 CIDR or address.
func ParseBlock(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		a, aerr := netip.ParseAddr(s)
		if aerr != nil {
			return netip.Prefix{}, fmt.Errorf("%q is neither a CIDR nor an address", s)
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	if !p.Addr().Is4() {
		return netip.Prefix{}, fmt.Errorf("%q: an IPv6 network (sandboxes never reach IPv6: boxd drops all of it)", s)
	}
	if p.Masked() != p {
		return netip.Prefix{}, fmt.Errorf("%q has host bits set (did you mean %s?)", s, p.Masked())
	}
	return p, nil
}

// readHost lists the host's IPv4 addresses and routes (every table). A
// dump that changed while it was read is read again.
func readHost() ([]hostAddr, []hostRoute, error) {
	var err error
	for range 5 {
		var as []hostAddr
		var rs []hostRoute
		if as, rs, err = readHostOnce(); err == nil {
			return as, rs, nil
		}
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			break
		}
	}
	return nil, nil, fmt.Errorf("network: host addresses and routes: %w", err)
}

func readHostOnce() ([]hostAddr, []hostRoute, error) {
	nas, err := netlink.AddrList(nil, netlink.FAMILY_V4)
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
	nrs, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, nil, err
	}
	var rs []hostRoute
	for _, nr := range nrs {
		dst := ipNetPrefix(nr.Dst)
		if !dst.IsValid() {
			dst = netip.MustParsePrefix("0.0.0.0/0")
		}
		rs = append(rs, hostRoute{Dst: dst, Type: nr.Type})
	}
	return as, rs, nil
}

// ipNetPrefix is n as an IPv4 prefix, or the zero Prefix.
func ipNetPrefix(n *net.IPNet) netip.Prefix {
	if n == nil || n.IP.To4() == nil {
		return netip.Prefix{}
	}
	a, _ := netip.AddrFromSlice(n.IP.To4())
	ones, bits := n.Mask.Size()
	if bits != 32 {
		return netip.Prefix{}
	}
	return netip.PrefixFrom(a, ones)
}

// blocked is the always-blocked set of the host as it is now.
func (m *Manager) blocked() ([]netip.Prefix, error) {
	as, rs, err := readHost()
	if err != nil {
		return nil, err
	}
	return blockedSet(m.cfg.Subnet, m.cfg.Block, as, rs), nil
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

// screenAnswer removes from up's answer section the A records a sandbox
// with allowlist allow must not be handed: non-unicast addresses, and
// addresses in the always-blocked set unless one of its CIDR entries
// names them. It returns the addresses to admit (never a blocked one:
// a CIDR entry lets those through on its own terms) and the shortest TTL
// among them.
func (m *Manager) screenAnswer(allow []Dest, up *dns.Msg) ([]netip.Addr, time.Duration) {
	var addrs []netip.Addr
	ttl := maxAdmit
	up.Answer = slices.DeleteFunc(up.Answer, func(rr dns.RR) bool {
		a, ok := rr.(*dns.A)
		if !ok {
			return false
		}
		ip, ok := netip.AddrFromSlice(a.A.To4())
		if !ok || a.A.To4() == nil || !unicast(ip) {
			return true
		}
		if m.isBlocked(ip) {
			return !slices.ContainsFunc(allow, func(d Dest) bool { return d.IsCIDR() && d.Prefix.Contains(ip) })
		}
		addrs = append(addrs, ip)
		ttl = min(ttl, time.Duration(a.Hdr.Ttl)*time.Second)
		return false
	})
	return addrs, ttl
}
