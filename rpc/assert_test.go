//go:build linux

package rpc

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net/http"
	"strings"
	"testing"
)

// TestOwnerAsserter checks who may assert an owner: only the certificate
// --owner-asserter names, only with the header, never as admin; the
// header from any other caller is ignored.
func TestOwnerAsserter(t *testing.T) {
	a, err := ParseOwnerAsserter("cn:boxd-gateway")
	if err != nil {
		t.Fatal(err)
	}
	m, err := ParseCertMap(strings.NewReader("cn:agent 1234 write\n"))
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{OwnerAsserter: a, CertMap: m}
	req := func(cn string, hdr ...string) *http.Request {
		r, _ := http.NewRequest("POST", "https://node/boxd.v1.SandboxService/GetSandbox", nil)
		r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{{Subject: pkix.Name{CommonName: cn}}}}
		for i := 0; i+1 < len(hdr); i += 2 {
			r.Header.Set(hdr[i], hdr[i+1])
		}
		return r
	}
	for _, c := range []struct {
		r     *http.Request
		uid   uint32
		scope string // "": refused
	}{
		{req("boxd-gateway", AssertOwnerHeader, "4242", AssertScopeHeader, ScopeExec), 4242, ScopeExec},
		{req("boxd-gateway"), 0, ""}, // no owner: no caller
		{req("boxd-gateway", AssertOwnerHeader, "4242", AssertScopeHeader, ScopeAdmin), 0, ""}, // never admin
		{req("boxd-gateway", AssertOwnerHeader, "4242"), 0, ""},                                // no scope
		{req("boxd-gateway", AssertOwnerHeader, "4242", AssertScopeHeader, "exec", "Authorization", "Bearer x"), 0, ""},
		{req("agent", AssertOwnerHeader, "4242", AssertScopeHeader, ScopeExec), 1234, ScopeWrite}, // ignored
		{req("Boxd-Gateway", AssertOwnerHeader, "4242", AssertScopeHeader, ScopeExec), 0, ""},     // exact name
	} {
		rec, err := s.remoteIdentity(c.r)
		if (err == nil) != (c.scope != "") || (err == nil && (rec.UID != c.uid || rec.Scope != c.scope)) {
			t.Errorf("%s %v: %+v, %v; want uid %d scope %q", c.r.TLS.PeerCertificates[0].Subject.CommonName, c.r.Header, rec, err, c.uid, c.scope)
		}
	}
	if _, err := ParseOwnerAsserter("gateway"); err == nil {
		t.Error("ParseOwnerAsserter accepted a name without a kind")
	}
}
