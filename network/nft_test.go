package network

import (
	"net/netip"
	"testing"
)

func TestIntervalElements(t *testing.T) {
	ps := []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("10.1.0.0/16"), // inside the first
		netip.MustParsePrefix("192.168.1.7/32"), netip.MustParsePrefix("192.168.1.8/32"), // adjacent: merged
		netip.MustParsePrefix("224.0.0.0/4"),
	}
	els := intervalElements(ps, false)
	want := []struct {
		key string
		end bool
	}{{"10.0.0.0", false}, {"11.0.0.0", true}, {"192.168.1.7", false}, {"192.168.1.9", true}, {"224.0.0.0", false}, {"240.0.0.0", true}}
	if len(els) != len(want) {
		t.Fatalf("got %d elements, want %d: %v", len(els), len(want), els)
	}
	for i, w := range want {
		a, _ := netip.AddrFromSlice(els[i].Key)
		if a.String() != w.key || els[i].IntervalEnd != w.end {
			t.Errorf("element %d = %s end=%v, want %s end=%v", i, a, els[i].IntervalEnd, w.key, w.end)
		}
	}
}

func TestIntervalElements6(t *testing.T) {
	ps := []netip.Prefix{
		netip.MustParsePrefix("fc00::/7"), netip.MustParsePrefix("fd00:ec2::254/128"), // inside the first
		netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("::/128"), // adjacent: merged
		netip.MustParsePrefix("ff00::/8"),      // up to the last address: no end
		netip.MustParsePrefix("10.0.0.0/8"),    // the other family
		netip.MustParsePrefix("::ffff:0:0/96"), // mapped IPv4
	}
	els := intervalElements(ps, true)
	want := []struct {
		key string
		end bool
	}{{"::", false}, {"::2", true}, {"::ffff:0.0.0.0", false}, {"::1:0:0:0", true}, {"fc00::", false}, {"fe00::", true}, {"ff00::", false}}
	if len(els) != len(want) {
		t.Fatalf("got %d elements, want %d: %v", len(els), len(want), els)
	}
	for i, w := range want {
		a, _ := netip.AddrFromSlice(els[i].Key)
		if a.String() != w.key || els[i].IntervalEnd != w.end {
			t.Errorf("element %d = %s end=%v, want %s end=%v", i, a, els[i].IntervalEnd, w.key, w.end)
		}
	}
}
