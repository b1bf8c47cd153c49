package runtime

import (
	"strings"
	"testing"
)

// FuzzParseSize: any input either parses to a non-negative size or errors;
// it never panics.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"256m", "1.5g", "0", "", "12xb", "9999999999999999999t", "1e3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err == nil && n < 0 {
			t.Fatalf("ParseSize(%q) = %d", s, n)
		}
	})
}

// FuzzValidateEnv: accepted entries are always K=V with a valid name.
func FuzzValidateEnv(f *testing.F) {
	for _, s := range []string{"A=1", "=x", "A", "_=", "A=\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, kv string) {
		if ValidateEnv("env", []string{kv}) != nil {
			return
		}
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || !envNameRe.MatchString(k) || strings.IndexByte(kv, 0) >= 0 {
			t.Fatalf("accepted %q", kv)
		}
	})
}
