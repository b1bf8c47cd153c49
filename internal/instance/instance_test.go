package instance

import (
	"net/netip"
	"reflect"
	"testing"
)

// TestDefaultKeepsNames: an install without --instance keeps every name
// it had.
func TestDefaultKeepsNames(t *testing.T) {
	for _, name := range []string{"", "default"} {
		n, err := Derive(name)
		if err != nil {
			t.Fatal(err)
		}
		want := Names{Instance: "default", Namespace: "boxd", CgroupParent: "/boxd", StateDir: "/var/lib/boxd",
			Socket: "/run/boxd/boxd.sock", SocketDir: "/run/boxd", Bridge: "boxd0", Subnet: "10.213.0.0/16",
			Resolver: "10.213.0.1:53", NftTable: "boxd", CNINetwork: "boxd0", CNICacheDir: "/var/lib/cni", UIDBase: 200000}
		if n != want {
			t.Fatalf("Derive(%q) = %+v, want %+v", name, n, want)
		}
	}
}

// TestInstancesDisjoint: two instances share no host-global name, no
// address and no uid, whichever pair of names (slots apart).
func TestInstancesDisjoint(t *testing.T) {
	names := []string{"", "a", "b", "ci", "e2e2", "staging", "x-1", "0123456789"}
	var all []Names
	for _, name := range names {
		n, err := Derive(name)
		if err != nil {
			t.Fatalf("Derive(%q): %v", name, err)
		}
		if len(n.Bridge) > 15 {
			t.Fatalf("%q: bridge %q longer than IFNAMSIZ-1", name, n.Bridge)
		}
		all = append(all, n)
	}
	for i := range all {
		for j := i + 1; j < len(all); j++ {
			a, b := all[i], all[j]
			if a.Slot == b.Slot {
				continue // the same slot is refused at start (boxd's slot lock)
			}
			va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
			for f := 0; f < va.NumField(); f++ {
				if va.Field(f).Interface() == vb.Field(f).Interface() {
					t.Errorf("%s and %s share %s = %v", a.Instance, b.Instance, va.Type().Field(f).Name, va.Field(f).Interface())
				}
			}
			pa, pb := netip.MustParsePrefix(a.Subnet), netip.MustParsePrefix(b.Subnet)
			if pa.Overlaps(pb) {
				t.Errorf("%s and %s: subnets %s and %s overlap", a.Instance, b.Instance, pa, pb)
			}
			lo, hi := a, b
			if lo.UIDBase > hi.UIDBase {
				lo, hi = hi, lo
			}
			if uint64(lo.UIDBase)+UIDSpan > uint64(hi.UIDBase) {
				t.Errorf("%s and %s: uid spans from %d and %d overlap", a.Instance, b.Instance, a.UIDBase, b.UIDBase)
			}
			if a.Listener("mcp") == b.Listener("mcp") {
				t.Errorf("%s and %s share a listener path", a.Instance, b.Instance)
			}
		}
	}
}

// TestEverySlotFits: every slot's subnet is a valid /20 inside 10.216/14,
// its resolver its gateway, and its uid span below 2^32-1.
func TestEverySlotFits(t *testing.T) {
	seen := map[int]string{}
	for i := 0; len(seen) < Slots && i < 100000; i++ {
		name := "n" + string(rune('a'+i%26)) + itoa(i)
		n, err := Derive(name)
		if err != nil {
			t.Fatal(err)
		}
		if n.Slot < 1 || n.Slot > Slots {
			t.Fatalf("%s: slot %d", name, n.Slot)
		}
		if _, ok := seen[n.Slot]; ok {
			continue
		}
		seen[n.Slot] = name
		p := netip.MustParsePrefix(n.Subnet)
		if p.Bits() != 20 || p.Masked() != p || !netip.MustParsePrefix("10.216.0.0/14").Contains(p.Addr()) || p.Overlaps(netip.MustParsePrefix("10.213.0.0/16")) {
			t.Fatalf("%s: subnet %s", name, p)
		}
		if n.Resolver != p.Addr().Next().String()+":53" {
			t.Fatalf("%s: resolver %s, subnet %s", name, n.Resolver, p)
		}
		if uint64(n.UIDBase)+UIDSpan > 1<<32-1 || uint64(n.UIDBase) < 200000+UIDSpan {
			t.Fatalf("%s: uid base %d", name, n.UIDBase)
		}
	}
	if len(seen) != Slots {
		t.Fatalf("reached %d slots of %d", len(seen), Slots)
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	s := ""
	for ; i > 0; i /= 10 {
		s = string(rune('0'+i%10)) + s
	}
	return s
}

func TestCheck(t *testing.T) {
	for name, ok := range map[string]bool{
		"": true, "default": true, "a": true, "ci-2": true, "0123456789": true,
		"01234567890": false, "-a": false, "A": false, "a_b": false, "a.b": false, "a/b": false, "é": false,
	} {
		if err := Check(name); (err == nil) != ok {
			t.Errorf("Check(%q) = %v, want ok %v", name, err, ok)
		}
	}
	if Socket("bad/name") != "" || Socket("") != "/run/boxd/boxd.sock" || Socket("ci") != "/run/boxd-ci/boxd.sock" {
		t.Fatal("Socket")
	}
}
