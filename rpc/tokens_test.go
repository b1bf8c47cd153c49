//go:build linux

package rpc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
)

func TestTokenStoreLifecycle(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "tokens.json")
	ts, err := OpenTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	rec, secret, err := ts.Create("ci", 1000, ScopeExec, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := ts.Create("ci", 1000, ScopeRead, time.Hour); err == nil {
		t.Fatal("a second token of the same name and owner was made")
	}
	if _, _, err := ts.Create("bad/name", 1000, ScopeRead, time.Hour); err == nil || !strings.Contains(err.Error(), "name") {
		t.Fatalf("bad name: %v", err)
	}
	if _, _, err := ts.Create("x", 1000, "root", time.Hour); err == nil || !strings.Contains(err.Error(), "scope") {
		t.Fatalf("bad scope: %v", err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v %v", fi, err)
	}
	b, _ := os.ReadFile(path)
	if strings.Contains(string(b), secret) || strings.Contains(string(b), secret[len(tokenPrefix):]) {
		t.Fatal("the token file holds the secret")
	}
	// Survives a restart.
	ts2, err := OpenTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ts2.Authenticate(secret)
	if err != nil || got.Name != rec.Name || got.UID != 1000 || got.Scope != ScopeExec {
		t.Fatalf("authenticate after reopen: %+v %v", got, err)
	}
	for _, bad := range []string{"", secret + "x", secret[:len(secret)-1], "Bearer " + secret, strings.Repeat("a", 10000), tokenPrefix + strings.Repeat("A", 200)} {
		if _, err := ts2.Authenticate(bad); err == nil {
			t.Fatalf("token %.20q passed", bad)
		}
	}
	if err := ts2.Delete("ci", 1001); err == nil {
		t.Fatal("another owner deleted the token")
	}
	if err := ts2.Delete("ci", 1000); err != nil {
		t.Fatal(err)
	}
	if _, err := ts2.Authenticate(secret); err == nil {
		t.Fatal("a revoked token passed")
	}
	_, short, _ := ts2.Create("short", 1000, ScopeRead, time.Hour)
	ts2.byHash[hashToken(short)].Expires = time.Now().Add(-time.Second)
	if _, err := ts2.Authenticate(short); err == nil {
		t.Fatal("an expired token passed")
	}
}

func TestParseTokenTTL(t *testing.T) {
	for in, want := range map[string]time.Duration{"": defaultTokenTTL, "30d": 30 * 24 * time.Hour, "12h": 12 * time.Hour, "90m": 90 * time.Minute} {
		if got, err := ParseTokenTTL(in); err != nil || got != want {
			t.Errorf("%q: %v %v", in, got, err)
		}
	}
	for _, in := range []string{"x", "-1h", "0d", "30s", "99999d", "1.5d"} {
		if _, err := ParseTokenTTL(in); err == nil {
			t.Errorf("%q passed", in)
		}
	}
}

func TestAuthLimiter(t *testing.T) {
	l := newAuthLimiter()
	now := time.Now()
	for i := range authFailLimit - 1 {
		l.fail("10.0.0.1", now.Add(time.Duration(i)*time.Millisecond))
	}
	if _, ok := l.blocked("10.0.0.1", now.Add(time.Second)); ok {
		t.Fatal("blocked before the limit")
	}
	l.fail("10.0.0.1", now.Add(time.Second))
	if _, ok := l.blocked("10.0.0.1", now.Add(2*time.Second)); !ok {
		t.Fatal("not blocked at the limit")
	}
	if _, ok := l.blocked("10.0.0.2", now.Add(2*time.Second)); ok {
		t.Fatal("another address is blocked")
	}
	if _, ok := l.blocked("10.0.0.1", now.Add(time.Second+authBlockFor)); ok {
		t.Fatal("still blocked after the block")
	}
}

func TestScopeAllows(t *testing.T) {
	cases := []struct {
		scope, proc string
		ok          bool
	}{
		{ScopeRead, "/boxd.v1.SandboxService/ListSandboxes", true},
		{ScopeRead, "/boxd.v1.SandboxService/Exec", false},
		{ScopeRead, "/boxd.v1.FileService/WriteFile", false},
		{ScopeRead, "/boxd.v1.SandboxService/DeleteSandbox", false},
		{ScopeExec, "/boxd.v1.SandboxService/Exec", true},
		{ScopeExec, "/boxd.v1.ProcessService/Start", true},
		{ScopeExec, "/boxd.v1.FileService/WriteFile", false},
		{ScopeExec, "/boxd.v1.TokenService/CreateToken", false},
		{ScopeWrite, "/boxd.v1.SandboxService/DeleteSandbox", true},
		{ScopeAdmin, "/boxd.v1.SandboxService/DeleteSandbox", true},
		{ScopeMetrics, "/boxd.v1.SandboxService/ListSandboxes", false},
	}
	for _, c := range cases {
		err := scopeAllows(c.scope, c.proc)
		if (err == nil) != c.ok {
			t.Errorf("%s %s: %v", c.scope, c.proc, err)
		}
		if err != nil && (connect.CodeOf(err) != connect.CodePermissionDenied || !strings.Contains(err.Error(), c.scope)) {
			t.Errorf("%s %s: %v", c.scope, c.proc, err)
		}
	}
}
