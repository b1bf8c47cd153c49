package runtime

import (
	"strconv"
	"strings"
	"testing"
)

// TestParseSizeForms pins every size form boxd documents (docs/api.md,
// docs/daemon.md, docs/sandboxes.md, docs/cli.md and ParseSize's comment:
// "256m", "1.5g", "512MiB", a plain number of bytes, "0") and the malformed
// ones, with their exact results. ParseSize parses with go-units'
// RAMInBytes; the table was run against the hand-written parser it
// replaced, and passes unchanged on both.
func TestParseSizeForms(t *testing.T) {
	const bad = -1
	for _, tc := range []struct {
		in   string
		want int64 // bad: an error quoting the input
	}{
		// Documented forms.
		{"0", 0},
		{"1073741824", 1 << 30},
		{"256m", 256 << 20},
		{"1g", 1 << 30},
		{"2g", 2 << 30},
		{"32g", 32 << 30},
		{"16m", 16 << 20},
		{"64m", 64 << 20},
		{"10m", 10 << 20},
		{"512k", 512 << 10},
		{"2t", 2 << 40},
		{"1.5g", 3 << 29},
		{"512MiB", 512 << 20},
		// Upper case, a "b" or "ib" after the unit, a space before it,
		// space around it, bytes with "b".
		{"256M", 256 << 20},
		{"1G", 1 << 30},
		{"256mb", 256 << 20},
		{"256MB", 256 << 20},
		{"256mib", 256 << 20},
		{"4KiB", 4 << 10},
		{"1 g", 1 << 30},
		{"1\tg", 1 << 30},
		{"1  g", 1 << 30},
		{" 64m ", 64 << 20},
		{"100b", 100},
		{"100B", 100},
		{"100ib", 100},
		// Fractions truncate to whole bytes.
		{"0.5k", 512},
		{"1.0001k", 1024},
		{"0.1", 0},
		{"1.5", 1},
		// The largest size below the limit, and the limit itself.
		{"4194303t", 4194303 << 40},
		{"4194304t", bad},
		{"99999999999t", bad},
		{"9999999999999999999t", bad},
		{"99999999999999999999g", bad},
		{"99999999999999999999", bad},
		// Malformed.
		{"", bad},
		{" ", bad},
		{"m", bad},
		{"g1", bad},
		{"-1m", bad},
		{"-0", bad},
		{"+1m", bad},
		{"1.5.2g", bad},
		{".5g", bad},
		{"5.g", bad},
		{"10q", bad},
		{"12xb", bad},
		{"1e9", bad},
		{"1e3k", bad},
		{"0x10", bad},
		{"0x1p4", bad},
		{"1_000", bad},
		{"Inf", bad},
		{"NaN", bad},
		{"1p", bad},
		{"1pb", bad},
		{"1MIB", bad},
		{"1mbb", bad},
		{"1 g b", bad},
		{"1gg", bad},
		{"1k1", bad},
		{"1,5g", bad},
		{"256m\x00", bad},
	} {
		got, err := ParseSize(tc.in)
		if tc.want == bad {
			if err == nil {
				t.Errorf("ParseSize(%q) = %d, want an error", tc.in, got)
			} else if !strings.Contains(err.Error(), strconv.Quote(strings.TrimSpace(tc.in))) {
				t.Errorf("ParseSize(%q): error %q does not name the input", tc.in, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}
