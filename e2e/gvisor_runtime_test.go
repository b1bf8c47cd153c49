//go:build linux

package e2e

import (
	"strings"
	"testing"
)

func TestGvisorRuntimeProbe(t *testing.T) {
	id := newSandbox(t, "--runtime", "gvisor", "--memory", "128m")
	out := sh(t, id, "echo hi; uname -a; id; ls -la /.boxd /.boxd/agent; cat /proc/self/status | grep -i cap")
	t.Logf("%s", out)
	if !strings.Contains(out, "hi") {
		t.Fatal(out)
	}
}
