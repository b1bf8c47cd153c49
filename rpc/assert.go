//go:build linux

package rpc

import (
	"crypto/x509"
	"fmt"
	"net/http"
	"strings"

	"github.com/boxd-dev/boxd/rpc/apiwire"
)

// A fleet's gateway (cmd/boxd-gateway) checks its callers' tokens itself
// and reaches each node's boxd with one client certificate. That
// certificate is no caller of its own: boxd accepts it only with the
// owner it asserts on a caller's behalf, in AssertOwnerHeader (and the
// caller's scope in AssertScopeHeader), and only the certificate that
// --owner-asserter names may assert: the headers from any other caller,
// token or certificate, are ignored. An asserted caller is never an
// admin.

// The headers an owner asserter's calls carry.
const (
	AssertOwnerHeader = apiwire.AssertOwnerHeader
	AssertScopeHeader = apiwire.AssertScopeHeader
)

// OwnerAsserter is the client certificate of --owner-asserter.
type OwnerAsserter struct {
	match certEntry
}

// ParseOwnerAsserter reads KIND:NAME (KIND cn, dns, email or uri), the
// certificate name that may assert owners.
func ParseOwnerAsserter(s string) (*OwnerAsserter, error) {
	kind, name, ok := strings.Cut(s, ":")
	if !ok || !certMapKinds[kind] || name == "" {
		return nil, fmt.Errorf("--owner-asserter: %q: want cn:, dns:, email: or uri: followed by the certificate's name", s)
	}
	return &OwnerAsserter{match: certEntry{kind: kind, name: name}}, nil
}

// matches says whether cert is the asserter's.
func (a *OwnerAsserter) matches(cert *x509.Certificate) bool {
	return a != nil && a.match.matches(cert)
}

// asserted reads the caller r's asserter names: a host user and a scope
// other than admin (an asserter acts for users, never as the host's
// administrator).
func (a *OwnerAsserter) asserted(r *http.Request) (TokenRecord, error) {
	owner, scope := r.Header.Get(AssertOwnerHeader), r.Header.Get(AssertScopeHeader)
	if owner == "" {
		return TokenRecord{}, fmt.Errorf("the owner asserter's certificate (%s:%s) names no caller by itself: the call needs %s", a.match.kind, a.match.name, AssertOwnerHeader)
	}
	uid, err := lookupOwner(owner)
	if err != nil {
		return TokenRecord{}, fmt.Errorf("%s: %w", AssertOwnerHeader, err)
	}
	switch scope {
	case ScopeRead, ScopeExec, ScopeWrite:
	default:
		return TokenRecord{}, fmt.Errorf("%s: %q: an owner asserter may assert read, exec or write", AssertScopeHeader, scope)
	}
	return TokenRecord{Name: fmt.Sprintf("asserted by cert %s:%s", a.match.kind, a.match.name), UID: uid, Scope: scope}, nil
}
