//go:build linux

package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
)

func TestMain(m *testing.M) {
	skip, err := Require()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if skip {
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// pinnedVersion is the containerd version go.mod pins: from the build info
// when the test binary has it (go test binaries usually do not list
// dependencies), else from `go list -m`.
func pinnedVersion(t *testing.T) string {
	t.Helper()
	const mod = "github.com/containerd/containerd/v2"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == mod {
				if d.Replace != nil {
					return d.Replace.Version
				}
				return d.Version
			}
		}
	}
	cmd := exec.Command(goTool(), "list", "-m", "-f", "{{.Version}}", mod)
	cmd.Dir = RepoRoot()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -m %s: %v", mod, err)
	}
	return strings.TrimSpace(string(out))
}

// sameVersion compares a module version ("v2.2.9") with a daemon version
// ("2.2.9+unknown", "1.6.20~ds1").
func sameVersion(module, daemon string) bool {
	daemon = strings.TrimPrefix(daemon, "v")
	if i := strings.IndexAny(daemon, "+~"); i >= 0 {
		daemon = daemon[:i]
	}
	return strings.TrimPrefix(module, "v") == daemon
}

func TestContainerd(t *testing.T) {
	c, err := StartContainerd()
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			c.Stop()
		}
	}()
	t.Logf("containerd %s in %s", c.Version, c.Dir)

	if want := pinnedVersion(t); c.Version != want {
		t.Errorf("setup.sh reports containerd %s, go.mod pins %s", c.Version, want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := client.New(c.Address, client.WithDefaultNamespace("boxd-testenv"))
	if err != nil {
		t.Fatal(err)
	}
	serving, err := cl.IsServing(ctx)
	if err != nil || !serving {
		t.Fatalf("IsServing = %v, %v\n%s", serving, err, c.LogTail(20))
	}
	v, err := cl.Version(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !sameVersion(pinnedVersion(t), v.Version) {
		t.Errorf("daemon version %q, go.mod pins %s", v.Version, pinnedVersion(t))
	}
	t.Logf("daemon version %s revision %q", v.Version, v.Revision)

	// The overlayfs snapshotter must support ID-mapped mounts here
	// (user-namespaced sandboxes without chowning).
	caps, err := cl.GetSnapshotterCapabilities(ctx, "overlayfs")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("overlayfs capabilities: %v", caps)
	hasRemap := false
	for _, capa := range caps {
		hasRemap = hasRemap || capa == "remap-ids"
	}
	if !hasRemap {
		t.Logf("overlayfs does not advertise remap-ids on this kernel: user namespaces fall back to a chowned copy")
	}
	cl.Close()

	// The ctr next to the daemon works too.
	if out, err := exec.Command(c.Ctr, "--address", c.Address, "version").CombinedOutput(); err != nil {
		t.Fatalf("ctr version: %v\n%s", err, out)
	}

	dir := c.Dir
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped = true
	if err := c.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	procs, err := ProcessesUsing(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(procs) > 0 {
		t.Errorf("processes remain after Stop:\n%s", strings.Join(procs, "\n"))
	}
	mps, err := MountsUnder(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(mps) > 0 {
		t.Errorf("mounts remain after Stop: %v", mps)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s still exists after Stop (err %v)", dir, err)
	}
}

// TestStopAfterCrash kills the daemon while a container runs, then checks
// that Stop still leaves no shim, container process or mount behind.
func TestStopAfterCrash(t *testing.T) {
	rootfs, err := BusyboxRootfs()
	if err != nil {
		t.Fatal(err)
	}
	c, err := StartContainerd()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()

	// A read-only rootfs directory used as is (no snapshot), so the shared
	// cached image is not modified. FIFOs go under c.Dir: ctr's default,
	// /run/containerd/fifo, is shared and nothing removes them after a crash.
	ctr := func(args ...string) (string, error) {
		if args[0] == "run" {
			args = append([]string{"run", "--fifo-dir", filepath.Join(c.Dir, "fifo")}, args[1:]...)
		}
		cmd := exec.Command(c.Ctr, append([]string{"--address", c.Address, "--namespace", "boxd-testenv"}, args...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := ctr("run", "--rm", "--read-only", "--rootfs", rootfs, "hello", "/bin/sh", "-c", "echo hello from $(cat /etc/hostname)"); err != nil || !strings.Contains(out, "hello from boxd") {
		t.Fatalf("ctr run: %v\n%s\n%s", err, out, c.LogTail(20))
	}
	if out, err := ctr("run", "-d", "--read-only", "--rootfs", rootfs, "sleeper", "/bin/sleep", "1000"); err != nil {
		t.Fatalf("ctr run -d: %v\n%s", err, out)
	}
	if procs, _ := ProcessesUsing(c.Address); len(procs) == 0 {
		t.Fatal("no shim is running")
	}

	pid, err := os.ReadFile(filepath.Join(c.Dir, "containerd.pid"))
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("kill", "-KILL", strings.TrimSpace(string(pid))).CombinedOutput(); err != nil {
		t.Fatalf("kill: %v %s", err, out)
	}
	dir := c.Dir
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if procs, _ := ProcessesUsing(dir); len(procs) > 0 {
		t.Errorf("processes remain after Stop:\n%s", strings.Join(procs, "\n"))
	}
	if procs, _ := ProcessesUsing("sleep 1000"); len(procs) > 0 {
		t.Errorf("container process remains after Stop:\n%s", strings.Join(procs, "\n"))
	}
	if mps, _ := MountsUnder(dir); len(mps) > 0 {
		t.Errorf("mounts remain after Stop: %v", mps)
	}
}

func TestBusyboxRootfs(t *testing.T) {
	dir, err := BusyboxRootfs()
	if err != nil {
		t.Fatal(err)
	}
	if target, err := os.Readlink(filepath.Join(dir, "bin", "sh")); err != nil || target != "busybox" {
		t.Errorf("bin/sh -> %q, %v", target, err)
	}
	passwd, err := os.ReadFile(filepath.Join(dir, "etc", "passwd"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"root:x:0:0:", "sandbox:x:1000:1000:", "nobody:x:65534:65534:"} {
		if !strings.Contains(string(passwd), want) {
			t.Errorf("/etc/passwd lacks %q", want)
		}
	}
	st, err := os.Stat(filepath.Join(dir, "tmp"))
	if err != nil || st.Mode()&os.ModeSticky == 0 || st.Mode().Perm() != 0o777 {
		t.Errorf("/tmp: %v %v", st, err)
	}
	again, err := BusyboxRootfs()
	if err != nil || again != dir {
		t.Errorf("second call: %q, %v (want cached %q)", again, err, dir)
	}
}

func TestRepoRoot(t *testing.T) {
	root := RepoRoot()
	for _, p := range []string{"go.mod", "scripts/setup.sh", "scripts/containerd.sh", "images/busybox/build.sh"} {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			t.Error(err)
		}
	}
}
