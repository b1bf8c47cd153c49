package network

import (
	"net/netip"
	"testing"
)

func TestBlockedAddr(t *testing.T) {
	set, err := Blocked(netip.MustParsePrefix(DefaultSubnet), []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")})
	if err != nil {
		t.Fatal(err)
	}
	for a, want := range map[string]bool{
		"127.0.0.1": true, "::1": true, "::ffff:127.0.0.1": true, "169.254.169.254": true,
		"::ffff:169.254.169.254": true, "64:ff9b::a9fe:a9fe": true, "fe80::1": true, "fd00:ec2::254": true,
		"0.0.0.0": true, "::": true, "224.0.0.1": true, "ff02::1": true,
		netip.MustParsePrefix(DefaultSubnet).Addr().Next().String(): true,
		"100.100.100.200": true, "168.63.129.16": true, "198.51.100.9": true, "::ffff:198.51.100.9": true,
		"203.0.113.7": false, "2001:db8::1": false, "64:ff9b::cb00:7107": false,
	} {
		if _, got := BlockedAddr(set, netip.MustParseAddr(a)); got != want {
			t.Errorf("BlockedAddr(%s) = %v; want %v", a, got, want)
		}
	}
}
