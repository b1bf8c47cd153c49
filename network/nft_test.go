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
	els := intervalElements(ps)
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
