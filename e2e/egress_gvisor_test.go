//go:build linux

package e2e

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestEgressGvisor: an egress sandbox under gVisor (runsc's own network
// stack on the sandbox's interface) reaches its allowlist, by address and
// by name, and nothing else: not another port of an allowed host, another
// host, metadata or boxd's host, nor a host before its name is resolved;
// a refused name is in the deny log.
func TestEgressGvisor(t *testing.T) {
	e := newEgressNet(t)
	// runsc bind-mounts a network namespace for its gofers under its root
	// (boxd's state dir) on the first create; it belongs to no sandbox.
	t.Cleanup(func() {
		_ = unix.Unmount(filepath.Join(e.stateDir, "gvisor", "root", e.namespace, "null-netns"), unix.MNT_DETACH)
	})
	e.start(t)
	t.Cleanup(func() { e.stop(t, syscall.SIGTERM) })
	e.must(t, "image", "import", "--rootfs", env.busybox, "--name", testImage)
	id := e.must(t, "create", "--runtime", "gvisor", "--memory", "256m", "--network", "egress",
		"--allow", h1Addr+"/32:80", "--allow", "denied.test:80")
	t.Cleanup(func() { _, _, _ = e.boxctl("rm", "-f", id) })
	var sb struct {
		Runtime string `json:"runtime"`
	}
	must(t, json.Unmarshal([]byte(e.must(t, "inspect", id)), &sb))
	if sb.Runtime != "gvisor" {
		t.Fatalf("runtime %q, want gvisor", sb.Runtime)
	}
	e.reaches(t, id, "http://"+h1Addr+"/", "h1")
	e.refused(t, id, "http://"+h1Addr+":8080/")
	e.refused(t, id, "http://"+h2Addr+"/")
	e.refused(t, id, "http://"+metaAddr+"/")
	e.refused(t, id, "http://"+bAddr+":8081/")
	if got := e.lookup(t, id, "allowed.test"); len(got) != 0 {
		t.Errorf("allowed.test (not on the list) resolved to %v", got)
	}
	if got := e.lookup(t, id, "denied.test"); strings.Join(got, ",") != h2Addr {
		t.Fatalf("denied.test resolved to %v, want %s", got, h2Addr)
	}
	e.reaches(t, id, "http://"+h2Addr+"/", "h2")
	// The refused name is in the deny log. (Refused connections of a
	// gVisor sandbox are not: see docs/runtimes.md.)
	if _, n := findDenial(e.denials(t, id), "allowed.test", 53, "dns", "name_not_allowed"); n == 0 {
		t.Errorf("the refused name is not in the deny log: %+v", e.denials(t, id))
	}
	e.must(t, "rm", "-f", id)
	e.clean(t, "after delete")
}
