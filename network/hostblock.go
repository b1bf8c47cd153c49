package network

import (
	"fmt"
	"net"
	"net/netip"
)

// Blocked is the always-blocked set of a boxd whose bridge is subnet and
// whose administrator added block (--block), for
// connections boxd makes itself from the host's network (a registry's
// redirects and bearer realm): the IPv4 set the sandboxes' firewall
// refuses (blocked), plus its IPv6 counterparts, since the host, unlike a
// sandbox, routes IPv6. An IPv4-mapped IPv6 address is to be unmapped,
// and the IPv4 address inside a NAT64 one (64:ff9b::/96) taken out,
// before it is looked up (BlockedAddr).
func Blocked(subnet netip.Prefix, block []netip.Prefix) ([]netip.Prefix, error) {
	// blocked reads nothing of the manager but its subnet and block.
	out, err := (&Manager{cfg: Config{Subnet: subnet, Block: block}}).blocked()
	if err != nil {
		return nil, err
	}
	for _, p := range []string{
		"::/128",    // unspecified: reaches the host itself
		"::1/128",   // loopback
		"fe80::/10", // link-local
		"fc00::/7",  // unique local: private networks, and cloud metadata (fd00:ec2::254)
		"fec0::/10", // site-local (deprecated, still routed by some hosts)
		"ff00::/8",  // multicast
	} {
		out = append(out, netip.MustParsePrefix(p))
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("network: host addresses: %w", err)
	}
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.To4() != nil {
			continue
		}
		if ip, ok := netip.AddrFromSlice(ipn.IP); ok {
			out = append(out, netip.PrefixFrom(ip, 128))
		}
	}
	return out, nil
}

// nat64 is the well-known NAT64 prefix (RFC 6052): its last 32 bits are an
// IPv4 address, reached through the translator.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// BlockedAddr returns the prefix of set that holds a (after unmapping an
// IPv4-mapped address and taking the IPv4 address out of a NAT64 one),
// and false if none does.
func BlockedAddr(set []netip.Prefix, a netip.Addr) (netip.Prefix, bool) {
	a = a.Unmap()
	if nat64.Contains(a) {
		b := a.As16()
		a = netip.AddrFrom4([4]byte(b[12:]))
	}
	for _, p := range set {
		if p.Contains(a) {
			return p, true
		}
	}
	return netip.Prefix{}, false
}
