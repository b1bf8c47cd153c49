package network

import (
	"strings"
	"testing"
)

func TestParseDest(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"203.0.113.0/24", "203.0.113.0/24"},
		{"203.0.113.7", "203.0.113.7/32"},
		{"203.0.113.0/24:443", "203.0.113.0/24:443"},
		{"API.Example.com.", "api.example.com"},
		{"api.example.com:443", "api.example.com:443"},
		{"*.example.net", "*.example.net"},
		{"*", "*"},
		{"*:443", "*:443"},
		{"2001:db8::/32", "2001:db8::/32"},
		{"2001:DB8::7", "2001:db8::7/128"},
		{"[2001:db8::/32]:443", "[2001:db8::/32]:443"},
		{"[2001:db8::7]:443", "[2001:db8::7/128]:443"},
	} {
		d, err := ParseDest(c.in)
		if err != nil || d.String() != c.want {
			t.Errorf("ParseDest(%q) = %q, %v; want %q", c.in, d, err, c.want)
			continue
		}
		if back, err := ParseDest(d.String()); err != nil || back != d {
			t.Errorf("%q does not read back: %v %v", d, back, err)
		}
	}
	for _, c := range []struct{ in, why string }{
		{"", "empty"},
		{"10.0.0.0/33", "not a CIDR"},
		{"10.1.2.3/8", "host bits"},
		{"300.1.2.3", "not an IP address"},
		{"[2001:db8::1]", "[ADDRESS]:PORT"},
		{"[2001:db8::1]:", "not a number"},
		{"[10.0.0.1]:80", "IPv6 addresses only"},
		{"::ffff:10.0.0.1", "as IPv4"},
		{"fe80::1%eth0", "no zone"},
		{"2001:db8::/129", "not a CIDR"},
		{"2001:db8::1/32", "host bits"},
		{"[2001:db8::1]:0", "outside 1-65535"},
		{"1.2.3.4:0", "outside 1-65535"},
		{"1.2.3.4:70000", "outside 1-65535"},
		{"1.2.3.4:http", "not a number"},
		{":443", "no destination"},
		{"bad_name!.org", "not a DNS name"},
		{"*.org", "two labels"},
		{"a..b", "not a DNS name"},
	} {
		if _, err := ParseDest(c.in); err == nil || !strings.Contains(err.Error(), c.why) {
			t.Errorf("ParseDest(%q) = %v; want an error saying %q", c.in, err, c.why)
		}
	}
}

func TestMatchName(t *testing.T) {
	wild, _ := ParseDest("*.example.org")
	exact, _ := ParseDest("example.org")
	any, _ := ParseDest("*")
	cidr, _ := ParseDest("10.0.0.0/8")
	for _, c := range []struct {
		d    Dest
		q    string
		want bool
	}{
		{wild, "a.example.org", true}, {wild, "a.b.example.org", true}, {wild, "example.org", false}, {wild, "badexample.org", false},
		{exact, "example.org", true}, {exact, "a.example.org", false},
		{any, "anything.test", true}, {cidr, "example.org", false},
	} {
		if got := c.d.MatchName(c.q); got != c.want {
			t.Errorf("%s.MatchName(%q) = %v, want %v", c.d, c.q, got, c.want)
		}
	}
}

func TestAllowedPorts(t *testing.T) {
	allow, err := ParseAllow("allow", []string{"a.test:443", "a.test:80", "*.b.test", "10.0.0.0/8"})
	if err != nil {
		t.Fatal(err)
	}
	if ports, ok := allowedPorts(allow, "a.test"); !ok || len(ports) != 2 {
		t.Errorf("a.test: %v %v, want ports 443 and 80", ports, ok)
	}
	if ports, ok := allowedPorts(allow, "x.b.test"); !ok || ports != nil {
		t.Errorf("x.b.test: %v %v, want every port", ports, ok)
	}
	if _, ok := allowedPorts(allow, "c.test"); ok {
		t.Error("c.test allowed")
	}
	// "*" resolves every name (the firewall still refuses the blocked set).
	any, _ := ParseAllow("allow", []string{"*"})
	if ports, ok := allowedPorts(any, "c.test"); !ok || ports != nil {
		t.Errorf("'*': %v %v, want every name on every port", ports, ok)
	}
	any443, _ := ParseAllow("allow", []string{"*:443"})
	if ports, ok := allowedPorts(any443, "c.test"); !ok || len(ports) != 1 || ports[0] != 443 {
		t.Errorf("'*:443': %v %v, want port 443", ports, ok)
	}
}
