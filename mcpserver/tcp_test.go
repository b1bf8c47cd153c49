package mcpserver

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestGuard(t *testing.T) {
	const token = "0123456789abcdef0123456789abcdef"
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	origins := Origins(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}, "127.0.0.1", false)
	h := guard(ok, HTTPOptions{Token: token, CheckOrigin: true, Origins: origins})
	for _, c := range []struct {
		auth, origin string
		want         int
	}{
		{"Bearer " + token, "", 200},
		{"bearer " + token, "http://LOCALHOST:8080", 200},
		{"Bearer " + token, "http://127.0.0.1:8080/", 200},
		{"", "", 401},
		{"Bearer", "", 401},
		{"Bearer " + token[1:], "", 401},
		{"Bearer " + token + "0", "", 401},
		{"Basic " + token, "", 401},
		{"Bearer " + token, "http://evil.example:8080", 403},
		{"Bearer " + token, "http://127.0.0.1.evil.example:8080", 403},
		{"Bearer " + token, "http://127.0.0.1", 403},
		{"Bearer " + token, "https://127.0.0.1:8080", 403},
		{"Bearer " + token, "null", 403},
		{"Bearer " + token, "", 200},
		{"", "http://evil.example", 403},
	} {
		r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8080/mcp", nil)
		if c.auth != "" {
			r.Header.Set("Authorization", c.auth)
		}
		if c.origin != "" {
			r.Header.Set("Origin", c.origin)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != c.want {
			t.Errorf("Authorization %q, Origin %q: %d, want %d", c.auth, c.origin, w.Code, c.want)
		}
		if w.Code == 401 && !strings.HasPrefix(w.Header().Get("WWW-Authenticate"), "Bearer ") {
			t.Errorf("Authorization %q: 401 without a Bearer challenge: %q", c.auth, w.Header().Get("WWW-Authenticate"))
		}
	}
	// An empty Origin header is an Origin too (and no browser's).
	r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8080/mcp", nil)
	r.Header.Set("Authorization", "Bearer "+token)
	r.Header["Origin"] = []string{""}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != 403 {
		t.Errorf("empty Origin: %d, want 403", w.Code)
	}
}

func TestTokenFiles(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "tok")
	tok, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteTokenFile(p, tok); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadTokenFile(p); err != nil || got != tok {
		t.Fatalf("read back %q %v, want %q", got, err, tok)
	}
	// An existing file of ours is replaced and made private.
	if err := os.WriteFile(p, []byte("old and much longer content than a token\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteTokenFile(p, tok); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v after WriteTokenFile", fi.Mode().Perm())
	}
	if got, err := ReadTokenFile(p); err != nil || got != tok {
		t.Fatalf("read back %q %v", got, err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(p, link); err != nil {
		t.Fatal(err)
	}
	if err := WriteTokenFile(link, tok); err == nil {
		t.Errorf("WriteTokenFile followed a symbolic link")
	}
	for name, c := range map[string]struct {
		content string
		mode    os.FileMode
		want    string
	}{
		"group-readable": {tok, 0o640, "0640"},
		"short":          {"secret", 0o600, "at least 16"},
		"spaces":         {"a token with spaces in it", 0o600, "without spaces"},
	} {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(c.content), c.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(f, c.mode); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadTokenFile(f); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), f) {
			t.Errorf("%s: %v; want an error naming %s and %q", name, err, f, c.want)
		}
	}
	if _, err := ReadTokenFile(dir); err == nil || !strings.Contains(err.Error(), dir) {
		t.Errorf("a directory: %v", err)
	}
}
