//go:build linux

package main

import (
	"strings"
	"testing"
)

// TestInstanceDerivesFlags: --instance (or the config key) sets the
// host-global flags not given; a flag given explicitly wins; the default
// instance keeps every default.
func TestInstanceDerivesFlags(t *testing.T) {
	cc, err := runWith(t, `instance = "ci"`+"\nbridge = \"brx\"\n", "--namespace", "ns-x")
	if err != nil {
		t.Fatal(err)
	}
	if err := applyInstance(cc); err != nil {
		t.Fatal(err)
	}
	n := names(cc)
	for flag, want := range map[string]string{
		"namespace": "ns-x", "bridge": "brx", "state-dir": "/var/lib/boxd-ci", "socket": "/run/boxd-ci/boxd.sock",
		"bridge-subnet": n.Subnet,
	} {
		if got := cc.String(flag); got != want {
			t.Errorf("--%s = %q, want %q", flag, got, want)
		}
	}
	if n.CgroupParent != "/ns-x" || n.NftTable != "boxd-ci" || n.CNICacheDir != "/var/lib/boxd-ci/network/cni" || n.CNINetwork != "brx" {
		t.Errorf("names %+v", n)
	}
	if cc.Uint("userns-host-id") == 200000 || uint32(cc.Uint("userns-host-id")) != n.UIDBase {
		t.Errorf("--userns-host-id = %d, names %d", cc.Uint("userns-host-id"), n.UIDBase)
	}
	var b strings.Builder
	printConfig(&b, n)
	if !strings.Contains(b.String(), `bridge = "brx"`) || !strings.Contains(b.String(), `# nftables-table = "boxd-ci"`) {
		t.Errorf("print-config:\n%s", b.String())
	}

	cc, err = runWith(t, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := applyInstance(cc); err != nil {
		t.Fatal(err)
	}
	if n := names(cc); n.Namespace != "boxd" || n.Bridge != "boxd0" || n.StateDir != "/var/lib/boxd" || n.Socket != "/run/boxd/boxd.sock" ||
		n.Subnet != "10.213.0.0/16" || n.UIDBase != 200000 || n.NftTable != "boxd" || n.CNICacheDir != "/var/lib/cni" {
		t.Errorf("default instance: %+v", n)
	}

	cc, err = runWith(t, `instance = "Not_OK"`)
	if err != nil {
		t.Fatal(err)
	}
	if err := fromConfig(cc, applyInstance(cc)); err == nil || !strings.Contains(err.Error(), "key instance") {
		t.Errorf("bad instance name: %v", err)
	}
}
