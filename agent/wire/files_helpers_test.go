package wire

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestMatchGlob(t *testing.T) {
	for _, c := range []struct {
		pat, name string
		want      bool
	}{
		{"*.go", "main.go", true},
		{"*.go", "a/main.go", false},
		{"**/*.go", "main.go", true},
		{"**/*.go", "a/b/c/main.go", true},
		{"**/*.go", "a/b/c/main.py", false},
		{"a/**", "a", false},
		{"a/**", "a/x", true},
		{"a/**", "a/x/y", true},
		{"a/**/b", "a/b", true},
		{"a/**/b", "a/x/y/b", true},
		{"a/**/b", "a/x/y/c", false},
		{"**", "anything/at/all", true},
		{"**/x/**/y", "p/x/q/r/y", true},
		{"**/x/**/y", "p/x/q/r/z", false},
		{"?.txt", "ab.txt", false},
		{"[ab].txt", "b.txt", true},
		{".*", ".git", true},
		{"*", ".hidden", true},
		{"ünï/*.ç", "ünï/fé.ç", true},
	} {
		if got := MatchGlob(c.pat, c.name); got != c.want {
			t.Errorf("MatchGlob(%q, %q) = %v, want %v", c.pat, c.name, got, c.want)
		}
	}
}

// A pattern of many "**" against a deep path must not backtrack
// exponentially.
func TestMatchGlobIsLinear(t *testing.T) {
	pat := strings.Repeat("**/a/", 200) + "b"
	name := strings.Repeat("a/", 64) + "c"
	start := time.Now()
	if MatchGlob(pat, name) {
		t.Fatal("matched")
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("took %v", d)
	}
}

func TestCheckGlobAndOwner(t *testing.T) {
	for _, p := range []string{"", "[", "a/[b", "x\x00", strings.Repeat("a", MaxPatternLen+1)} {
		if err := CheckGlob("pattern", p); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "pattern") {
			t.Errorf("CheckGlob(%q) = %v", p, err)
		}
	}
	for _, p := range []string{"*.go", "**/x", "/abs/**/[a-c]?"} {
		if err := CheckGlob("pattern", p); err != nil {
			t.Errorf("CheckGlob(%q) = %v", p, err)
		}
	}
	for _, o := range []string{"", ":", "a b", "x:y:z", "-x", strings.Repeat("u", MaxUserLen+1)} {
		if err := CheckOwnerSpec(o); !errors.Is(err, ErrInvalid) {
			t.Errorf("CheckOwnerSpec(%q) = %v", o, err)
		}
	}
	for _, o := range []string{"agent", "1000", "agent:staff", "agent:", ":staff", "0:0"} {
		if err := CheckOwnerSpec(o); err != nil {
			t.Errorf("CheckOwnerSpec(%q) = %v", o, err)
		}
	}
}
