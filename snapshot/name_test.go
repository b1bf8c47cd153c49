package snapshot

import (
	"testing"

	"github.com/containerd/errdefs"
)

func TestNormalizeName(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"busybox", "busybox:latest"},
		{"boxd/busybox", "boxd/busybox:latest"},
		{"boxd/busybox:1.36", "boxd/busybox:1.36"},
		{"registry.local:5000/team/img", "registry.local:5000/team/img:latest"},
		{"registry.local:5000/team/img:v2", "registry.local:5000/team/img:v2"},
		{"img@sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "img@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
	} {
		got, err := NormalizeName(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("NormalizeName(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "Upper/Case", "has space", "../escape", "a//b", "-lead", "x\x00y", string(make([]byte, 300))} {
		if _, err := NormalizeName(bad); !errdefs.IsInvalidArgument(err) {
			t.Errorf("NormalizeName(%q) = %v, want invalid argument", bad, err)
		}
	}
}
