//go:build linux

package rpc

import (
	"bufio"
	"crypto/x509"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// A client certificate (--client-ca) names a caller only through the
// administrator's map (--client-cert-map): a verified certificate whose
// names no line matches is unauthenticated, whatever CA signed it. A
// matched certificate is a caller exactly as a token is: a host user and a
// scope, admin only if the scope is admin and the user an admin.

// CertMap is a parsed --client-cert-map.
type CertMap struct {
	entries []certEntry
}

type certEntry struct {
	kind, name string // kind: cn, dns, email or uri
	uid        uint32
	scope      string
	line       int
}

// certMapKinds are the certificate names a line may match.
var certMapKinds = map[string]bool{"cn": true, "dns": true, "email": true, "uri": true}

// maxCertMapBytes bounds the file: it is the administrator's, but a wrong
// path (a log, a device) should fail clearly, not fill memory.
const maxCertMapBytes = 1 << 20

// LoadCertMap reads the map at path.
func LoadCertMap(path string) (*CertMap, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--client-cert-map: %w", err)
	}
	defer f.Close()
	m, err := ParseCertMap(io.LimitReader(f, maxCertMapBytes+1))
	if err != nil {
		return nil, fmt.Errorf("--client-cert-map %s: %w", path, err)
	}
	return m, nil
}

// ParseCertMap reads lines of `KIND:NAME USER SCOPE` (KIND: cn, dns,
// email or uri; USER: a host user name or uid; SCOPE: read, exec, write,
// admin or metrics); blank lines and lines starting with # are skipped.
func ParseCertMap(r io.Reader) (*CertMap, error) {
	m := &CertMap{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 64<<10)
	n, total := 0, 0
	for sc.Scan() {
		n++
		total += len(sc.Bytes()) + 1
		if total > maxCertMapBytes {
			return nil, fmt.Errorf("larger than %d bytes", maxCertMapBytes)
		}
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		e, err := parseCertLine(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		e.line = n
		m.entries = append(m.entries, e)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return m, nil
}

func parseCertLine(line string) (certEntry, error) {
	f := strings.Fields(line)
	if len(f) != 3 {
		return certEntry{}, fmt.Errorf("%q: want KIND:NAME USER SCOPE", line)
	}
	kind, name, ok := strings.Cut(f[0], ":")
	if !ok || !certMapKinds[kind] || name == "" {
		return certEntry{}, fmt.Errorf("%q: the match is cn:, dns:, email: or uri: followed by the name", f[0])
	}
	uid, err := lookupOwner(f[1])
	if err != nil {
		return certEntry{}, err
	}
	if !validScope(f[2]) {
		return certEntry{}, fmt.Errorf("scope %q: want read, exec, write, admin or metrics", f[2])
	}
	return certEntry{kind: kind, name: name, uid: uid, scope: f[2]}, nil
}

func validScope(s string) bool {
	switch s {
	case ScopeRead, ScopeExec, ScopeWrite, ScopeAdmin, ScopeMetrics:
		return true
	}
	return false
}

// Lookup finds the first line, in file order, that names one of cert's
// names, and returns it as the caller's record (Name says which line).
func (m *CertMap) Lookup(cert *x509.Certificate) (TokenRecord, bool) {
	for _, e := range m.entries {
		if e.matches(cert) {
			return TokenRecord{Name: fmt.Sprintf("cert %s:%s", e.kind, e.name), UID: e.uid, Scope: e.scope}, true
		}
	}
	return TokenRecord{}, false
}

func (e certEntry) matches(cert *x509.Certificate) bool {
	switch e.kind {
	case "cn":
		return cert.Subject.CommonName == e.name
	case "dns":
		return slices.Contains(cert.DNSNames, e.name)
	case "email":
		return slices.Contains(cert.EmailAddresses, e.name)
	case "uri":
		for _, u := range cert.URIs {
			if u.String() == e.name {
				return true
			}
		}
	}
	return false
}

// certName is how a refusal names a certificate: its subject, cut short
// (the client chose it).
func certName(cert *x509.Certificate) string {
	s := cert.Subject.String()
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}
