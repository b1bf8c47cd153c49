package network

import (
	"net/http"
	"testing"

	"github.com/boxd-dev/boxd/internal/secrets"
)

// The placeholder is replaced in the secret's header only, where it
// stands or by the format; other headers keep it.
func TestSubstitute(t *testing.T) {
	const ph = "boxd-secret-abc"
	for _, c := range []struct {
		format, in, want string
	}{
		{"", "Bearer " + ph, "Bearer VALUE"},
		{"Bearer {}", "token " + ph, "Bearer VALUE"},
		{"", "no placeholder", "no placeholder"},
		{"Bearer {}", "no placeholder", "no placeholder"},
	} {
		h := http.Header{}
		h.Set("Authorization", c.in)
		h.Set("X-Other", ph)
		substitute(h, &secrets.Secret{Header: "Authorization", Format: c.format, Value: "VALUE"}, ph)
		if got := h.Get("Authorization"); got != c.want {
			t.Errorf("format %q, %q: got %q, want %q", c.format, c.in, got, c.want)
		}
		if h.Get("X-Other") != ph {
			t.Errorf("another header changed: %q", h.Get("X-Other"))
		}
	}
}
