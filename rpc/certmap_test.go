//go:build linux

package rpc

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"net/url"
	"strings"
	"testing"
)

func TestCertMapLookup(t *testing.T) {
	m, err := ParseCertMap(strings.NewReader(`
# comment
cn:agent 0 write
dns:b.example.test 0 read
email:ops@example.test 0 metrics
uri:spiffe://example.test/ci 0 exec
cn:agent 0 admin
`))
	if err != nil {
		t.Fatal(err)
	}
	spiffe, _ := url.Parse("spiffe://example.test/ci")
	for _, c := range []struct {
		cert  x509.Certificate
		scope string // "": no match
		name  string
	}{
		{x509.Certificate{Subject: pkix.Name{CommonName: "agent"}}, ScopeWrite, "cert cn:agent"}, // the first line wins
		{x509.Certificate{Subject: pkix.Name{CommonName: "b.example.test"}}, "", ""},             // a CN is not a DNS name
		{x509.Certificate{DNSNames: []string{"x.test", "b.example.test"}}, ScopeRead, "cert dns:b.example.test"},
		{x509.Certificate{EmailAddresses: []string{"ops@example.test"}}, ScopeMetrics, "cert email:ops@example.test"},
		{x509.Certificate{URIs: []*url.URL{spiffe}}, ScopeExec, "cert uri:spiffe://example.test/ci"},
		{x509.Certificate{Subject: pkix.Name{CommonName: "Agent"}}, "", ""}, // exact, case included
	} {
		rec, ok := m.Lookup(&c.cert)
		if ok != (c.scope != "") || rec.Scope != c.scope || rec.Name != c.name || (ok && rec.UID != 0) {
			t.Errorf("lookup %+v: %+v %v, want scope %q name %q", c.cert.Subject, rec, ok, c.scope, c.name)
		}
	}
}

func TestCertMapRefusesBadLines(t *testing.T) {
	for line, want := range map[string]string{
		"cn:a root":                  "KIND:NAME USER SCOPE",
		"cn:a root write extra":      "KIND:NAME USER SCOPE",
		"subject:a root write":       "cn:, dns:, email: or uri:",
		"cn: root write":             "cn:, dns:, email: or uri:",
		"cn:a no-such-user-xq write": "no-such-user-xq",
		"cn:a root owner":            `scope "owner"`,
	} {
		_, err := ParseCertMap(strings.NewReader("# ok\n" + line + "\n"))
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "line 2") {
			t.Errorf("%q: %v, want an error naming line 2 and %q", line, err, want)
		}
	}
	if _, err := ParseCertMap(strings.NewReader(strings.Repeat("# padding padding padding\n", 50000))); err == nil {
		t.Errorf("a map over 1 MiB was read")
	}
}
