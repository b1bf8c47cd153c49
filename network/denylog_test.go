package network

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestDenyLogAggregates(t *testing.T) {
	d := newDenyLog()
	now := time.Unix(1000, 0)
	d.now = func() time.Time { return now }
	var emitted []DenyRecord
	f := func(id string, recs []DenyRecord) { emitted = append(emitted, recs...) }
	d.onFlush.Store(&f)
	for range 5 {
		d.add("a", DenyRecord{Dest: "198.18.1.2", Port: 80, Proto: "tcp", Reason: ReasonNotAllowed})
		now = now.Add(time.Second)
	}
	d.add("a", DenyRecord{Dest: "198.18.1.2", Port: 81, Proto: "tcp", Reason: ReasonNotAllowed})
	d.add("b", DenyRecord{Dest: "x.test", Port: 53, Proto: "dns", Reason: ReasonNameNotAllowed})
	if got := d.records("a"); len(got) != 2 || got[0].Count != 5 || got[0].Last.Sub(got[0].First) != 4*time.Second {
		t.Fatalf("records before flush = %+v", got)
	}
	d.flush()
	if len(emitted) != 3 {
		t.Fatalf("flush emitted %+v", emitted)
	}
	// The next window starts new records.
	d.add("a", DenyRecord{Dest: "198.18.1.2", Port: 80, Proto: "tcp", Reason: ReasonNotAllowed})
	if got := d.records("a"); len(got) != 3 || got[2].Count != 1 {
		t.Fatalf("records after flush = %+v", got)
	}
	d.forget("a")
	if got := d.records("a"); got != nil || len(emitted) != 4 {
		t.Fatalf("after forget: %+v, emitted %d", got, len(emitted))
	}
}

func TestDenyLogBounded(t *testing.T) {
	d := newDenyLog()
	for w := range 10 {
		for i := range 1000 {
			d.add("a", DenyRecord{Dest: fmt.Sprintf("10.0.%d.%d", w, i%250), Port: uint16(i), Proto: "udp", Reason: ReasonNotAllowed})
		}
		got := d.records("a")
		cur := got[len(got)-1]
		if cur.Reason != ReasonUnrecorded || cur.Count != 1000-DenyKeysPerWindow {
			t.Fatalf("window %d: last record %+v", w, cur)
		}
		d.flush()
	}
	if got := d.records("a"); len(got) != DenyRecordsPerSandbox {
		t.Fatalf("kept %d records, want %d", len(got), DenyRecordsPerSandbox)
	}
}

func TestSanitizeName(t *testing.T) {
	for in, want := range map[string]string{
		"API.Example.test":      "api.example.test",
		`a\.b.test`:             `a\046b.test`,
		`\027[31mred\007.test`:  `\027\09131mred\007.test`,
		`x\"y\\z.test`:          `x\034y\092z.test`,
		"sp ace.test":           `sp\032ace.test`,
		"*.wild.test":           "*.wild.test",
		"utf\xc3\xa9.test":      `utf\195\169.test`,
		strings.Repeat("a", 20): strings.Repeat("a", 20),
	} {
		if got := SanitizeName(in); got != want {
			t.Errorf("SanitizeName(%q) = %q, want %q", in, got, want)
		}
	}
	long := SanitizeName(strings.Repeat(`\255`, 250))
	if len(long) != maxDestLen || !strings.HasSuffix(long, "...") {
		t.Errorf("a long name gave %d bytes: %q", len(long), long)
	}
}

func TestParsePacket(t *testing.T) {
	v4 := make([]byte, 24)
	v4[0], v4[9] = 0x45, 6
	copy(v4[12:], []byte{10, 213, 0, 5})
	copy(v4[16:], []byte{198, 18, 1, 2})
	v4[22], v4[23] = 0, 80
	r, ok := parsePacket(v4)
	if !ok || r.src != netip.MustParseAddr("10.213.0.5") || r.dst != netip.MustParseAddr("198.18.1.2") || r.proto != "tcp" || r.port != 80 {
		t.Errorf("v4: %+v %v", r, ok)
	}
	v6 := make([]byte, 44)
	v6[0], v6[6] = 0x60, 17
	src, dst := netip.MustParseAddr("fd62::5").As16(), netip.MustParseAddr("2001:2::2").As16()
	copy(v6[8:], src[:])
	copy(v6[24:], dst[:])
	v6[42], v6[43] = 0x01, 0xbb
	r, ok = parsePacket(v6)
	if !ok || r.dst != netip.MustParseAddr("2001:2::2") || r.proto != "udp" || r.port != 443 {
		t.Errorf("v6: %+v %v", r, ok)
	}
	for _, bad := range [][]byte{nil, v4[:19], {0x4f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, v6[:39], {0x70}} {
		if _, ok := parsePacket(bad); ok {
			t.Errorf("parsePacket(%x) accepted", bad)
		}
	}
	// A short transport header: no port, no panic.
	if r, ok := parsePacket(v4[:21]); !ok || r.port != 0 {
		t.Errorf("short: %+v %v", r, ok)
	}
}
