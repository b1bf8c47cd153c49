//go:build linux

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// allocated is how much of the host's disk a file really occupies.
func allocated(t *testing.T, p string) int64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

// TestDiskCap: a disk bomb stops at the cap with ENOSPC, the host holds no
// more than the cap for it, inspect shows the use, deleting gives the
// space back, and the sandbox and its image are gone after rm.
func TestDiskCap(t *testing.T) {
	id := newSandbox(t, "--disk", "64m")
	img := filepath.Join(env.stateDir, "sandboxes", id, "disk.ext4")
	if _, err := os.Stat(img); err != nil {
		t.Fatalf("no disk image: %v", err)
	}
	// The bomb: 200 MiB into /workspace and into / (the writable layer).
	for _, p := range []string{"/workspace/bomb", "/bomb"} {
		out, stderr, code := boxctlRun("exec", "--timeout", "60s", id, "--", "sh", "-c", "dd if=/dev/zero of="+p+" bs=1M count=200 2>&1; sync")
		if code == 0 && !strings.Contains(out+stderr, "No space left on device") {
			t.Errorf("dd of 200 MiB under a 64m cap: exit %d, %q %q", code, out, stderr)
		}
		if !strings.Contains(out+stderr, "No space left on device") {
			t.Errorf("dd did not end with ENOSPC: %q %q", out, stderr)
		}
		sh(t, id, "rm -f "+p)
	}
	sh(t, id, "dd if=/dev/zero of=/workspace/fill bs=1M count=200 2>/dev/null; sync; true")
	size := sh(t, id, "stat -c %s /workspace/fill")
	if n, _ := strconv.ParseInt(strings.TrimSpace(size), 10, 64); n > 64<<20 || n < 40<<20 {
		t.Errorf("file under a 64m cap is %d bytes", n)
	}
	// The host holds at most the cap (plus ext4's metadata) for it.
	if a := allocated(t, img); a > 72<<20 {
		t.Errorf("disk image occupies %d bytes on the host, more than the 64m cap", a)
	}
	sb := inspect(t, id)
	if sb.DiskBytes != 64<<20 || sb.DiskUsedBytes < 40<<20 || sb.DiskUsedBytes > 64<<20 {
		t.Errorf("inspect disk %d used %d, want 64m and about the file", sb.DiskBytes, sb.DiskUsedBytes)
	}
	// The file API meets the same cap, with an error that says so.
	_, err := writeFile(ctx(t), &boxdv1.WriteFileRequest{SandboxId: id, Path: "/workspace/more"}, strings.NewReader(strings.Repeat("x", 32<<20)))
	if err == nil || !strings.Contains(err.Error(), "no space") {
		t.Errorf("write past the cap through the API: %v", err)
	}
	// Deleting gives the space back, to the sandbox and to the host.
	sh(t, id, "rm -f /workspace/fill /workspace/more; sync")
	deadline := time.Now().Add(10 * time.Second)
	for allocated(t, img) > 24<<20 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if a := allocated(t, img); a > 24<<20 {
		t.Errorf("after rm the image still occupies %d bytes (discard not passed through)", a)
	}
	sh(t, id, "dd if=/dev/zero of=/workspace/again bs=1M count=32 2>/dev/null && sync")
}

func TestDiskCapBadInput(t *testing.T) {
	for _, tc := range []struct{ disk, want string }{
		{"lots", "limits.disk"},
		{"1m", "minimum"},
		{"1000t", "filesystem"},
	} {
		_, err := env.api.CreateSandbox(ctx(t), connect.NewRequest(&boxdv1.CreateSandboxRequest{Limits: &boxdv1.Limits{Disk: tc.disk}}))
		wantCode(t, "disk "+tc.disk, err, connect.CodeInvalidArgument, tc.want)
	}
}

// TestDiskCapSurvivesReboot: after the host lost the mount (a reboot), a
// restarted boxd mounts the sandbox's image again before its init starts,
// so the files and the cap come back.
func TestDiskCapSurvivesReboot(t *testing.T) {
	d := startBoxd(t, namespace+"-disk", true)
	out, stderr, code := d.boxctl("create", "--disk", "32m")
	if code != 0 {
		t.Fatal(stderr)
	}
	id := strings.TrimSpace(out)
	if _, stderr, code := d.boxctl("exec", id, "--", "sh", "-c", "echo kept > /workspace/f && sync"); code != 0 {
		t.Fatal(stderr)
	}
	resp, err := d.api.GetSandbox(d.c, connect.NewRequest(&boxdv1.GetSandboxRequest{Id: id}))
	if err != nil {
		t.Fatal(err)
	}
	pid := int(resp.Msg.Sandbox.InitPid)
	// The "reboot": boxd and the init die, the task goes, the mount goes.
	d.kill()
	syscall.Kill(pid, syscall.SIGKILL)
	for i := 0; i < 100 && syscall.Kill(pid, 0) == nil; i++ {
		time.Sleep(50 * time.Millisecond)
	}
	ctrCmd := func(args ...string) {
		out, err := exec.Command(env.ctrd.Ctr, append([]string{"--address", env.ctrd.Address, "-n", d.ns}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("ctr %v: %v %s", args, err, out)
		}
	}
	ctrCmd("task", "delete", id)
	img := filepath.Join(d.dir, "state", "sandboxes", id, "disk.ext4")
	mnt := diskMountOf(t, img)
	if err := syscall.Unmount(mnt, 0); err != nil {
		t.Fatalf("unmount %s: %v", mnt, err)
	}
	d.start(t)
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, _, code := d.boxctl("exec", id, "--", "cat", "/workspace/f")
		if code == 0 {
			if out != "kept\n" {
				t.Fatalf("file after the remount: %q", out)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox not back 20s after boxd restarted: %q", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := diskMountOf(t, img); got != mnt {
		t.Errorf("image mounted on %s, want %s", got, mnt)
	}
	if out, _, _ := d.boxctl("exec", id, "--", "sh", "-c", "dd if=/dev/zero of=/workspace/b bs=1M count=64 2>&1"); !strings.Contains(out, "No space left on device") {
		t.Errorf("cap gone after the remount: %q", out)
	}
	if _, stderr, code := d.boxctl("rm", "-f", id); code != 0 {
		t.Fatal(stderr)
	}
	if _, err := os.Stat(img); !os.IsNotExist(err) {
		t.Errorf("image left after rm: %v", err)
	}
	if m := diskMountOfOrEmpty(img); m != "" {
		t.Errorf("image still mounted on %s after rm", m)
	}
}

// diskMountOf is where the loop device backed by img is mounted.
func diskMountOf(t *testing.T, img string) string {
	t.Helper()
	m := diskMountOfOrEmpty(img)
	if m == "" {
		t.Fatalf("%s is not mounted", img)
	}
	return m
}

func diskMountOfOrEmpty(img string) string {
	out, _ := exec.Command("losetup", "-n", "-O", "NAME", "-j", img).Output()
	dev := strings.TrimSpace(string(out))
	if dev == "" {
		return ""
	}
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	for _, l := range strings.Split(string(mi), "\n") {
		f := strings.Fields(l)
		for i, x := range f {
			if x == "-" && i+2 < len(f) && f[i+2] == dev {
				return f[4]
			}
		}
	}
	return ""
}
