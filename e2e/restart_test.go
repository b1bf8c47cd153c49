//go:build linux

package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestSurvivesSIGKILL: a boxd killed with SIGKILL and restarted lists the
// same sandboxes, and exec and files work in them; a sandbox whose ttl ran
// out while boxd was down is destroyed when it comes back.
func TestSurvivesSIGKILL(t *testing.T) {
	keep := newSandbox(t, "--name", "survivor", "--label", "k=v", "--memory", "80m")
	sh(t, keep, "echo precious > /workspace/data.txt")
	out, err := boxctl(nil, "create", "--ttl", "2s")
	if err != nil {
		t.Fatal(err)
	}
	doomed := strings.TrimSpace(out)
	before, err := boxctl(nil, "ls", "--json")
	if err != nil {
		t.Fatal(err)
	}

	killDaemon()
	time.Sleep(2500 * time.Millisecond) // doomed expires while boxd is down
	if err := startDaemon(); err != nil {
		t.Fatal(err)
	}

	// The expiry pass at start-up removes the doomed one.
	if !expired(doomed, 10*time.Second) {
		t.Fatalf("sandbox %s expired while boxd was down and still exists", doomed)
	}
	assertGone(t, doomed)

	after, err := boxctl(nil, "ls", "--json")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(before, keep) || !strings.Contains(after, keep) || !strings.Contains(after, `"survivor"`) {
		t.Errorf("survivor missing after restart:\n%s", after)
	}
	if got := sh(t, "survivor", "cat /workspace/data.txt"); got != "precious\n" {
		t.Errorf("data after restart = %q", got)
	}
	sb := inspect(t, keep)
	if sb.MemoryBytes != 80<<20 || sb.Labels["k"] != "v" || sb.State != "running" {
		t.Errorf("settings after restart: %+v", sb)
	}
	host := t.TempDir()
	if _, err := boxctl(nil, "cp", keep+":/workspace/data.txt", host+"/d.txt"); err != nil {
		t.Errorf("cp after restart: %v", err)
	}
}
