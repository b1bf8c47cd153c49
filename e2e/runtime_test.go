//go:build linux

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/api/types/runc/options"
	"github.com/containerd/typeurl/v2"

	"github.com/boxd-dev/boxd/internal/runc"
	"github.com/boxd-dev/boxd/internal/testenv"
)

// TestRuntimePinned: sandboxes run on the runc scripts/setup.sh pins, and
// inspect and boxd's start-up log say so.
func TestRuntimePinned(t *testing.T) {
	want := strings.TrimPrefix(runc.Pinned, "v")
	out, err := exec.Command(testenv.Runc, "--version").Output()
	if err != nil || !strings.HasPrefix(string(out), "runc version "+want+"\n") {
		t.Fatalf("%s --version: %v: %q, want runc version %s", testenv.Runc, err, out, want)
	}
	id := newSandbox(t, "--memory", "64m")
	sb := inspect(t, id)
	if sb.Runtime != "runc" || sb.RuntimeVersion != want || len(sb.RuntimeAdvisories) != 0 {
		t.Errorf("inspect: runtime %q version %q advisories %v, want runc %s and none", sb.Runtime, sb.RuntimeVersion, sb.RuntimeAdvisories, want)
	}
	// The container's runtime options name the pinned binary: the shim
	// runs it for this sandbox's every runc call.
	ctr, err := env.ctr.LoadContainer(ctx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	info, err := ctr.Info(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	v, err := typeurl.UnmarshalAny(info.Runtime.Options)
	if err != nil {
		t.Fatalf("runtime options: %v", err)
	}
	if o, ok := v.(*options.Options); !ok || o.BinaryName != testenv.Runc {
		t.Errorf("runtime options %#v, want BinaryName %s", v, testenv.Runc)
	}
	b, err := os.ReadFile(env.daemonLog)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `msg=runtime name=runc version=`+want) {
		t.Errorf("boxd's log has no start-up line naming runc %s", want)
	}
}

// TestRuntimeVulnerableRefused: boxd will not start on a runc with a known
// container escape unless told to, and then inspect lists the escapes. The
// "runc" here answers --version as Debian bookworm's 1.1.5 does and hands
// every other call to the pinned runc, so the sandbox made below really
// runs; only the version boxd is told is old.
func TestRuntimeVulnerableRefused(t *testing.T) {
	dir := t.TempDir()
	_ = os.Chmod(dir, 0o711)
	fake := filepath.Join(dir, "runc")
	script := "#!/bin/sh\nif [ \"$1\" = --version ]; then printf 'runc version 1.1.5+ds1\\ncommit: 1.1.5+ds1-1+deb12u1\\nspec: 1.0.2-dev\\n'; exit 0; fi\nexec " + testenv.Runc + " \"$@\"\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ns := namespace + "-vuln"
	args := []string{"--socket", filepath.Join(dir, "boxd.sock"), "--containerd", env.ctrd.Address, "--namespace", ns,
		"--state-dir", filepath.Join(dir, "state"), "--init-binary", env.initBin, "--runc", fake}
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(c, env.boxd, args...).CombinedOutput()
	if err == nil || c.Err() != nil {
		t.Fatalf("boxd on runc 1.1.5 started (or hung): %v\n%s", err, out)
	}
	for _, w := range []string{"refusing to start", "runc 1.1.5+ds1", "CVE-2024-21626", "1.1.12", "CVE-2025-31133", "--allow-vulnerable-runtime"} {
		if !strings.Contains(string(out), w) {
			t.Errorf("boxd's refusal does not mention %q:\n%s", w, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "boxd.sock")); err == nil {
		t.Errorf("a refusing boxd made its socket")
	}

	// With the flag it starts, warns, and every sandbox records the escapes.
	d := startBoxd(t, ns, true, "--runc", fake, "--allow-vulnerable-runtime")
	b, err := os.ReadFile(filepath.Join(d.dir, "boxd.log"))
	if err != nil {
		t.Fatal(err)
	}
	log := string(b)
	if !strings.Contains(log, "--allow-vulnerable-runtime") || !strings.Contains(log, "CVE-2024-21626") {
		t.Errorf("boxd's log does not warn of the vulnerable runtime:\n%s", log)
	}
	if !slices.ContainsFunc(strings.Split(log, "\n"), func(l string) bool {
		return strings.Contains(l, "msg=runtime ") && strings.Contains(l, "version=1.1.5+ds1")
	}) {
		t.Errorf("boxd's log has no runtime line for 1.1.5+ds1:\n%s", log)
	}
	id, stderr, code := d.boxctl("create", "--memory", "64m")
	if code != 0 {
		t.Fatalf("create on the allowed runtime: %s", stderr)
	}
	id = strings.TrimSpace(id)
	js, stderr, code := d.boxctl("inspect", id)
	if code != 0 {
		t.Fatalf("inspect: %s", stderr)
	}
	var sb struct {
		Runtime           string   `json:"runtime"`
		RuntimeVersion    string   `json:"runtime_version"`
		RuntimeAdvisories []string `json:"runtime_advisories"`
	}
	mustJSON(t, []byte(js), &sb)
	if sb.Runtime != "runc" || sb.RuntimeVersion != "1.1.5+ds1" ||
		!slices.Equal(sb.RuntimeAdvisories, []string{"CVE-2024-21626", "CVE-2025-31133", "CVE-2025-52565", "CVE-2025-52881"}) {
		t.Errorf("inspect on the allowed runtime: %+v", sb)
	}
	if out, stderr, code := d.boxctl("exec", id, "--", "echo", "ran"); code != 0 || out != "ran\n" {
		t.Errorf("exec: %q %q %d", out, stderr, code)
	}
}
