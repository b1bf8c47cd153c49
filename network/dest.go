// Package network gives a sandbox that asks for it (--network egress) a
// network namespace of its own, a veth on a boxd bridge, NAT to the host's
// uplink, and a firewall that lets through only the destinations on the
// sandbox's allowlist. The namespace is made and configured before the
// sandbox's task starts; the runtime spec joins it by path.
//
// The pieces are the real ones: the CNI bridge and host-local plugins
// (through libcni, github.com/containernetworking/cni; lo is brought up in-process, see
// newNetNS), nftables through netlink
// (github.com/google/nftables), and a DNS resolver (github.com/miekg/dns)
// that answers only allowed names. IPv6 is routed (NAT66) only with a
// Config.Subnet6; without one a sandbox's IPv6 is switched off and the
// firewall drops any IPv6 from the bridge.
package network

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Modes a sandbox's network can have.
const (
	ModeNone   = "none"   // loopback only (the default)
	ModeEgress = "egress" // own namespace, NAT, allowlisted destinations
)

// Dest is one allowlist entry: a CIDR (a bare address is a /32), a DNS
// name, a wildcard name "*.suffix" (any name below suffix, not suffix
// itself), or "*" (any destination outside the always-blocked set). Port 0
// means every port.
type Dest struct {
	Prefix netip.Prefix // valid for a CIDR entry
	Name   string       // lower case, no trailing dot; "*.x" for a wildcard
	Any    bool         // "*"
	Port   uint16
}

// String is the canonical text of d, which ParseDest reads back.
func (d Dest) String() string {
	var s string
	switch {
	case d.Any:
		s = "*"
	case d.Name != "":
		s = d.Name
	default:
		s = d.Prefix.String()
		if d.Port != 0 && d.Prefix.Addr().Is6() {
			s = "[" + s + "]"
		}
	}
	if d.Port != 0 {
		s += ":" + strconv.Itoa(int(d.Port))
	}
	return s
}

// IsCIDR reports whether d names addresses (as opposed to names or "*").
func (d Dest) IsCIDR() bool { return d.Prefix.IsValid() }

// IsIPv6 reports whether d names IPv6 addresses.
func (d Dest) IsIPv6() bool { return d.Prefix.IsValid() && d.Prefix.Addr().Is6() }

// ParseDest reads an allowlist entry: "203.0.113.0/24", "203.0.113.7",
// "203.0.113.0/24:443", "2001:db8::/32", "[2001:db8::/32]:443",
// "[2001:db8::7]:443", "api.example.com", "api.example.com:443",
// "*.example.net", "*" or "*:443". An IPv6 entry with a port is written
// in brackets.
func ParseDest(s string) (Dest, error) {
	var d Dest
	if s == "" {
		return d, fmt.Errorf("empty destination")
	}
	if len(s) > 260 {
		return d, fmt.Errorf("%.40q...: longer than 260 bytes", s)
	}
	host, port, err := splitPort(s)
	if err != nil {
		return d, err
	}
	d.Port = port
	switch {
	case host == "*":
		d.Any = true
		return d, nil
	case host == "":
		return d, fmt.Errorf("%q: no destination before the port (use '*:PORT' for any destination)", s)
	}
	if strings.Contains(host, "/") {
		p, err := netip.ParsePrefix(host)
		if err != nil {
			return d, fmt.Errorf("%q is not a CIDR: %v", host, err)
		}
		if p.Addr().Is4In6() || p.Addr().Zone() != "" {
			return d, fmt.Errorf("%q: write an IPv4 network as IPv4, and no zone", host)
		}
		if p.Masked() != p {
			return d, fmt.Errorf("%q has host bits set (did you mean %s?)", host, p.Masked())
		}
		d.Prefix = p
		return d, nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Is4In6() || a.Zone() != "" {
			return d, fmt.Errorf("%q: write an IPv4 address as IPv4, and no zone", host)
		}
		d.Prefix = netip.PrefixFrom(a, a.BitLen())
		return d, nil
	}
	if looksNumeric(host) || strings.Contains(host, ":") {
		return d, fmt.Errorf("%q is not an IP address", host)
	}
	name := strings.ToLower(strings.TrimSuffix(host, "."))
	wild := strings.HasPrefix(name, "*.")
	if err := checkName(strings.TrimPrefix(name, "*.")); err != nil {
		return d, fmt.Errorf("%q is not a DNS name: %v", host, err)
	}
	if wild && !strings.Contains(name[2:], ".") {
		return d, fmt.Errorf("%q: a wildcard needs a suffix of at least two labels", host)
	}
	d.Name = name
	return d, nil
}

// splitPort cuts an entry into its destination and port (0 if none):
// "HOST:PORT", "[IPV6]:PORT", "[IPV6]", or an IPv6 address or CIDR alone.
func splitPort(s string) (string, uint16, error) {
	var host, ps string
	switch {
	case strings.HasPrefix(s, "["):
		end := strings.IndexByte(s, ']')
		if end < 0 || !strings.HasPrefix(s[end+1:], ":") {
			return "", 0, fmt.Errorf("%q: an IPv6 entry with a port is [ADDRESS]:PORT or [CIDR]:PORT", s)
		}
		host, ps = s[1:end], s[end+2:]
		if !strings.Contains(host, ":") {
			return "", 0, fmt.Errorf("%q: brackets are for IPv6 addresses only", s)
		}
	case strings.Count(s, ":") > 1:
		return s, 0, nil // IPv6 without a port
	case strings.Contains(s, ":"):
		i := strings.LastIndexByte(s, ':')
		host, ps = s[:i], s[i+1:]
	default:
		return s, 0, nil
	}
	p, err := strconv.ParseUint(ps, 10, 32)
	if err != nil {
		return "", 0, fmt.Errorf("%q: port %q is not a number", s, ps)
	}
	if p < 1 || p > 65535 {
		return "", 0, fmt.Errorf("%q: port %d is outside 1-65535", s, p)
	}
	return host, uint16(p), nil
}

// looksNumeric is true for things like "300.1.2.3" that are meant as
// addresses, so they are not taken for names.
func looksNumeric(s string) bool {
	for _, c := range s {
		if (c < '0' || c > '9') && c != '.' {
			return false
		}
	}
	return true
}

// checkName checks a host name by RFC 1123 rules (labels of letters,
// digits, '-' and '_', 1-63 bytes, 253 in all).
func checkName(n string) error {
	if n == "" || len(n) > 253 {
		return fmt.Errorf("length %d is outside 1-253", len(n))
	}
	for _, l := range strings.Split(n, ".") {
		if l == "" || len(l) > 63 {
			return fmt.Errorf("label %q is empty or longer than 63 bytes", l)
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return fmt.Errorf("label %q starts or ends with '-'", l)
		}
		for _, c := range l {
			ok := c == '-' || c == '_' || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')
			if !ok {
				return fmt.Errorf("label %q has the character %q", l, c)
			}
		}
	}
	return nil
}

// ParseAllow parses a list of entries; the error names the index.
func ParseAllow(field string, in []string) ([]Dest, error) {
	out := make([]Dest, 0, len(in))
	for i, s := range in {
		d, err := ParseDest(s)
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", field, i, err)
		}
		out = append(out, d)
	}
	return out, nil
}

// MatchName reports whether the DNS name q (lower case, no trailing dot)
// is allowed by d, and with which port.
func (d Dest) MatchName(q string) bool {
	switch {
	case d.Any:
		return true
	case d.Name == "":
		return false
	case strings.HasPrefix(d.Name, "*."):
		return strings.HasSuffix(q, d.Name[1:])
	default:
		return q == d.Name
	}
}

// Strings is the canonical text of each entry.
func Strings(ds []Dest) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.String()
	}
	return out
}
