//go:build linux

package runtime

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/boxd-dev/boxd/network"
)

func TestParseGit(t *testing.T) {
	egress := resolved{network: network.ModeEgress}
	for _, tc := range []struct {
		spec  string
		depth uint32
		r     resolved
		field string // "": accepted
	}{
		{"https://example.com/a/b.git", 0, egress, ""},
		{"git://198.18.0.2/repo.git#v1.0", 1, egress, ""},
		{"http://h:8080/r#feature/x", 0, egress, ""},
		{"https://example.com/r#" + strings.Repeat("a", 40), 0, egress, ""},
		{"", 3, egress, "git_depth"},
		{"https://example.com/r#" + strings.Repeat("a", 40), 1, egress, "git_depth"},
		{"https://example.com/r", 0, resolved{network: network.ModeNone}, "git"},
		{"ext::sh -c touch% /tmp/pwned", 0, egress, "git"},
		{"ext::sh", 0, egress, "git"},
		{"file:///etc", 0, egress, "git"},
		{"/srv/repo", 0, egress, "git"},
		{"ssh://git@example.com/r", 0, egress, "git"},
		{"git@example.com:r.git", 0, egress, "git"},
		{"https://user:secret@example.com/r", 0, egress, "git"},
		{"https://token@example.com/r", 0, egress, "git"},
		{"--upload-pack=touch /tmp/x", 0, egress, "git"},
		{"https:///r", 0, egress, "git"},
		{"https://example.com/r#--orphan", 0, egress, "git"},
		{"https://example.com/r#a..b", 0, egress, "git"},
		{"https://example.com/r#a b", 0, egress, "git"},
		{"https://example.com/r x", 0, egress, "git"},
		{"https://example.com/r\n", 0, egress, "git"},
	} {
		g, err := parseGit(tc.spec, tc.depth, tc.r)
		var fe *FieldError
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%q: %v", tc.spec, err)
		case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field):
			t.Errorf("%q depth %d: err %v, want a %s field error", tc.spec, tc.depth, err, tc.field)
		case tc.field == "" && g != nil:
			// The URL always comes after "--": never an option.
			a := g.args()
			if i := slices.Index(a, "--"); i < 0 || a[i+1] != g.url || a[len(a)-1] != GitDir {
				t.Errorf("%q: args %q", tc.spec, a)
			}
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("%q: the error shows the password: %v", tc.spec, err)
		}
	}
}
