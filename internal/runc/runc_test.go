package runc

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestVersionGate(t *testing.T) {
	for _, c := range []struct {
		v    string
		cves []string // the advisories that apply, in table order
	}{
		{"1.5.2", nil},
		{"1.5.0", nil},
		{"1.6.0-rc.1", nil},
		{"1.4.0", nil},
		{"1.4.0-rc.3", nil},
		{"1.3.3", nil},
		{"1.3.4", nil},
		{"1.2.8", nil},
		{"1.4.0-rc.2", []string{"CVE-2025-31133", "CVE-2025-52565", "CVE-2025-52881"}},
		{"1.3.2", []string{"CVE-2025-31133", "CVE-2025-52565", "CVE-2025-52881"}},
		{"1.2.7", []string{"CVE-2025-31133", "CVE-2025-52565", "CVE-2025-52881"}},
		// The 1.1 line got the 2024 fix but none of 2025's.
		{"1.1.15", []string{"CVE-2025-31133", "CVE-2025-52565", "CVE-2025-52881"}},
		// Debian bookworm's.
		{"1.1.5+ds1", []string{"CVE-2024-21626", "CVE-2025-31133", "CVE-2025-52565", "CVE-2025-52881"}},
		{"1.0.0-rc95", []string{"CVE-2024-21626", "CVE-2025-31133", "CVE-2025-52565", "CVE-2025-52881"}},
		{"1.0.0-rc93", []string{"CVE-2021-30465", "CVE-2024-21626", "CVE-2025-31133", "CVE-2025-52565", "CVE-2025-52881"}},
		{"1.0.0-rc5", []string{"CVE-2019-5736", "CVE-2021-30465", "CVE-2024-21626", "CVE-2025-31133", "CVE-2025-52565", "CVE-2025-52881"}},
	} {
		v, err := ParseVersion(c.v)
		if err != nil {
			t.Fatalf("%s: %v", c.v, err)
		}
		var got []string
		for _, a := range Vulnerable(v) {
			got = append(got, a.CVE)
		}
		if !slices.Equal(got, c.cves) {
			t.Errorf("runc %s: vulnerable to %v, want %v", c.v, got, c.cves)
		}
		err = Check(Info{Path: "/x/runc", Version: v})
		if (err == nil) != (len(c.cves) == 0) {
			t.Errorf("runc %s: Check = %v", c.v, err)
		}
		for _, cve := range c.cves {
			if err == nil || !strings.Contains(err.Error(), cve) {
				t.Errorf("runc %s: Check error %v does not name %s", c.v, err, cve)
			}
		}
	}
}

func TestParseOutput(t *testing.T) {
	info, err := ParseOutput("/usr/sbin/runc", "runc version 1.1.5+ds1\ncommit: 1.1.5+ds1-1+deb12u1\nspec: 1.0.2-dev\ngo: go1.19.8\nlibseccomp: 2.5.4\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := (Version{1, 1, 5, 0, "1.1.5+ds1"}); info.Version != want || info.Commit != "1.1.5+ds1-1+deb12u1" {
		t.Errorf("got %+v", info)
	}
	for _, bad := range []string{"", "runc version unknown\n", "hello\n", "runc version 1.x\n"} {
		if _, err := ParseOutput("/r", bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	for _, c := range []struct{ a, b string }{{"1.4.0-rc.2", "1.4.0-rc.3"}, {"1.4.0-rc.3", "1.4.0"}, {"1.3.9", "1.4.0-rc.1"}, {"1.0.0-rc6", "1.0.0-rc95"}} {
		a, b := mustParse(c.a), mustParse(c.b)
		if a.Compare(b) != -1 || b.Compare(a) != 1 || a.Compare(a) != 0 {
			t.Errorf("%s < %s does not hold", c.a, c.b)
		}
	}
}

// TestPinnedIsSafe keeps the pin, setup.sh's and boxd's, in step and past
// every advisory.
func TestPinnedIsSafe(t *testing.T) {
	v, err := ParseVersion(Pinned)
	if err != nil {
		t.Fatal(err)
	}
	if vs := Vulnerable(v); len(vs) > 0 {
		t.Errorf("pinned runc %s is vulnerable: %v", Pinned, vs)
	}
	b, err := os.ReadFile(filepath.Join("..", "..", "scripts", "lib.sh"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^RUNC_VERSION=(\S+)$`).FindSubmatch(b)
	if m == nil || string(m[1]) != Pinned {
		t.Errorf("scripts/lib.sh pins RUNC_VERSION=%s, package runc %s", m, Pinned)
	}
}
