package secrets

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestStoreOwnerScopedAndPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "secrets")
	st, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := &Secret{Name: "KEY", Owner: 1000, Hosts: []string{"API.Example.test."}, Value: "v1"}
	if err := st.Create(s); err != nil {
		t.Fatal(err)
	}
	if s.Hosts[0] != "api.example.test" || s.Header != "Authorization" {
		t.Errorf("not normalised: %+v", s.Info())
	}
	if err := st.Create(&Secret{Name: "KEY", Owner: 1000, Hosts: []string{"a.test"}, Value: "x"}); !errors.Is(err, ErrExists) {
		t.Errorf("second create: %v", err)
	}
	// Another owner's namespace is its own.
	if _, err := st.Get(1001, "KEY"); !errors.Is(err, ErrNotFound) {
		t.Errorf("another owner's get: %v", err)
	}
	if _, err := st.Rotate(1001, "KEY", "stolen"); !errors.Is(err, ErrNotFound) {
		t.Errorf("another owner's rotate: %v", err)
	}
	if err := st.Remove(1001, "KEY"); !errors.Is(err, ErrNotFound) {
		t.Errorf("another owner's remove: %v", err)
	}
	if l, _ := st.List(1001, false); len(l) != 0 {
		t.Errorf("another owner lists %v", l)
	}
	if l, _ := st.List(0, true); len(l) != 1 || l[0].Name != "KEY" {
		t.Errorf("admin list %v", l)
	}
	if _, err := st.Rotate(1000, "KEY", "v2"); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.Get(1000, "KEY"); got.Value != "v2" {
		t.Errorf("after rotate: %q", got.Value)
	}
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, _ error) error {
		fi, _ := d.Info()
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s is %v", p, fi.Mode())
		}
		return nil
	})
	// A name can never leave the owner's directory.
	if _, err := st.Get(1000, "../1000/KEY"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a path as a name: %v", err)
	}
}

func TestSecretValidate(t *testing.T) {
	for _, c := range []struct {
		s     Secret
		field string
	}{
		{Secret{Name: "", Hosts: []string{"a.test"}, Value: "v"}, "name"},
		{Secret{Name: "../x", Hosts: []string{"a.test"}, Value: "v"}, "name"},
		{Secret{Name: "k", Value: "v"}, "hosts"},
		{Secret{Name: "k", Hosts: []string{"*.a.test"}, Value: "v"}, "hosts[0]"},
		{Secret{Name: "k", Hosts: []string{"a.test", "10.0.0.1"}, Value: "v"}, "hosts[1]"},
		{Secret{Name: "k", Hosts: []string{"a.test:443"}, Value: "v"}, "hosts[0]"},
		{Secret{Name: "k", Hosts: []string{"localhost"}, Value: "v"}, "hosts[0]"},
		{Secret{Name: "k", Hosts: []string{"a.test"}, Value: "v", Header: "Bad Header"}, "header"},
		{Secret{Name: "k", Hosts: []string{"a.test"}, Value: "v", Format: "Bearer"}, "format"},
		{Secret{Name: "k", Hosts: []string{"a.test"}, Value: "v", Format: "{} {}"}, "format"},
		{Secret{Name: "k", Hosts: []string{"a.test"}, Value: "v\r\nX-Injected: 1"}, "value"},
		{Secret{Name: "k", Hosts: []string{"a.test"}, Value: ""}, "value"},
		{Secret{Name: "k", Hosts: []string{"a.test"}, Value: strings.Repeat("v", MaxValueBytes+1)}, "value"},
		{Secret{Name: "k", Hosts: []string{"a.test"}, Value: "v", UpstreamCA: "not pem"}, "upstream_ca"},
	} {
		err := c.s.Validate()
		if !errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), c.field+": ") {
			t.Errorf("%+v: %v, want invalid naming %s", c.s, err, c.field)
		}
		if strings.Contains(fmtErr(err), "X-Injected") {
			t.Errorf("the error quotes the value: %v", err)
		}
	}
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestCALeaf(t *testing.T) {
	dir := t.TempDir()
	ca, err := LoadCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(filepath.Join(dir, "ca-key.pem")); fi.Mode().Perm() != 0o600 {
		t.Errorf("CA key is %v", fi.Mode())
	}
	again, err := LoadCA(dir)
	if err != nil || string(again.PEM()) != string(ca.PEM()) {
		t.Fatalf("reload: %v", err)
	}
	leaf, err := ca.Leaf("api.example.test")
	if err != nil {
		t.Fatal(err)
	}
	roots, err := ParseCAs(string(ca.PEM()))
	if err != nil || leaf.Leaf.CheckSignatureFrom(roots[0]) != nil || leaf.Leaf.VerifyHostname("api.example.test") != nil {
		t.Errorf("leaf does not verify: %v", err)
	}
	if !strings.Contains(string(ca.Bundle()), string(ca.PEM())) {
		t.Errorf("bundle lacks the CA")
	}
}
