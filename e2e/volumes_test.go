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

	"github.com/boxd-dev/boxd/internal/rpcclient"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// volumeAt describes a volume through the daemon at sock.
func volumeAt(t *testing.T, sock, name string) *boxdv1.Volume {
	t.Helper()
	resp, err := rpcclient.NewVolumes(sock).GetVolume(ctx(t), connect.NewRequest(&boxdv1.GetVolumeRequest{Name: name}))
	if err != nil {
		t.Fatalf("get volume %s: %v", name, err)
	}
	return resp.Msg.Volume
}

// newVolume makes a volume on the shared boxd, removed (forced) at the end.
func newVolume(t *testing.T, name string, args ...string) *boxdv1.Volume {
	t.Helper()
	if _, stderr, code := boxctlRun(append([]string{"volume", "create", name}, args...)...); code != 0 {
		t.Fatalf("volume create %s: %s", name, stderr)
	}
	t.Cleanup(func() { boxctlRun("volume", "rm", "--force", name) })
	return volumeAt(t, env.socket, name)
}

// hostUID is the first host uid of a sandbox's block (its root).
func hostUID(t *testing.T, sb *boxdv1.Sandbox) uint32 {
	t.Helper()
	f := strings.Split(sb.Security.GetUidMap(), ":")
	if len(f) != 3 {
		t.Fatalf("uid map %q", sb.Security.GetUidMap())
	}
	n, _ := strconv.ParseUint(f[1], 10, 32)
	return uint32(n)
}

// TestVolumeOutlivesSandboxes: what one sandbox writes to a volume a
// second reads after the first is deleted, after boxd is SIGKILLed and
// restarted, after containerd is SIGKILLed and restarted, and after a
// simulated reboot (the volume's host mount gone). Files are owned by the
// sandbox's root inside, by the sandbox's uid block through its mount and
// by the volume's own block on the host: never host root.
func TestVolumeOutlivesSandboxes(t *testing.T) {
	d := startBoxd(t, namespace+"-vol", true)
	t.Cleanup(func() { detachVolumes(t, d) })
	vc := func(args ...string) string {
		t.Helper()
		out, stderr, code := d.boxctl(args...)
		if code != 0 {
			t.Fatalf("boxctl %v: exit %d: %s", args, code, stderr)
		}
		return strings.TrimSpace(out)
	}
	vc("volume", "create", "work", "--size", "64m", "--label", "team=x")
	vol := volumeAt(t, d.sock, "work")
	a := vc("create", "--volume", "work:/data")
	vc("exec", a, "--", "sh", "-c", "echo one > /data/f && mkdir /data/d && sync")
	if got := vc("exec", a, "--", "stat", "-c", "%u:%g", "/data/f"); got != "0:0" {
		t.Errorf("owner inside the sandbox: %s, want 0:0 (the sandbox's root)", got)
	}
	sb, err := d.api.GetSandbox(d.c, connect.NewRequest(&boxdv1.GetSandboxRequest{Id: a}))
	if err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	viaSandbox := filepath.Join("/proc", strconv.Itoa(int(sb.Msg.Sandbox.InitPid)), "root", "data", "f")
	if err := syscall.Stat(viaSandbox, &st); err != nil || st.Uid != hostUID(t, sb.Msg.Sandbox) {
		t.Errorf("file through the sandbox's mount: uid %d (%v), want the sandbox's root %d", st.Uid, err, hostUID(t, sb.Msg.Sandbox))
	}
	onHost := filepath.Join(d.dir, "state", "volumes", vol.Id, "mnt", "f")
	if err := syscall.Stat(onHost, &st); err != nil || st.Uid == 0 || st.Uid < 200000 || st.Uid == hostUID(t, sb.Msg.Sandbox) {
		t.Errorf("file on the host: uid %d (%v), want the volume's own block, not root nor the sandbox's", st.Uid, err)
	}
	if v := volumeAt(t, d.sock, "work"); len(v.Mounts) != 1 || v.Mounts[0].SandboxId != a || v.Labels["team"] != "x" || v.SizeBytes != 64<<20 {
		t.Errorf("inspect while mounted: %v", v)
	}
	vc("rm", a)
	if v := volumeAt(t, d.sock, "work"); len(v.Mounts) != 0 {
		t.Errorf("mounts after the sandbox is gone: %v", v.Mounts)
	}
	readBack := func(when, want string) string {
		t.Helper()
		id := vc("create", "--volume", "work:/data")
		if got := vc("exec", id, "--", "cat", "/data/f"); got != want {
			t.Fatalf("%s: /data/f = %q, want %q", when, got, want)
		}
		return id
	}
	b := readBack("after the writer was deleted", "one")
	vc("exec", b, "--", "sh", "-c", "echo two >> /data/f && sync")
	// boxd SIGKILLed while b mounts the volume: the restarted one knows b
	// holds it.
	d.kill()
	d.start(t)
	if v := volumeAt(t, d.sock, "work"); len(v.Mounts) != 1 || v.Mounts[0].SandboxId != b {
		t.Errorf("holders after boxd restart: %v", v.Mounts)
	}
	vc("rm", b)
	vc("rm", readBack("after boxd was killed", "one\ntwo"))
	restartContainerd(t)
	// boxd reconnects to containerd on its own, within its dial backoff.
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, stderr, code := d.boxctl("create", "--volume", "work:/data")
		if code == 0 {
			vc("rm", "-f", strings.TrimSpace(out))
			break
		}
		if time.Now().After(deadline) || !strings.Contains(stderr, "unavailable") {
			t.Fatalf("create after containerd restarted: exit %d: %s", code, stderr)
		}
		time.Sleep(500 * time.Millisecond)
	}
	vc("rm", "-f", readBack("after containerd was killed", "one\ntwo"))
	// The reboot: boxd gone, the host mount gone.
	d.kill()
	mnt := filepath.Join(d.dir, "state", "volumes", vol.Id, "mnt")
	if err := syscall.Unmount(mnt, 0); err != nil {
		t.Fatalf("unmount %s: %v", mnt, err)
	}
	d.start(t)
	c := readBack("after a reboot", "one\ntwo")
	vc("rm", c)
	vc("volume", "rm", "work")
	if _, err := os.Stat(filepath.Join(d.dir, "state", "volumes", vol.Id)); !os.IsNotExist(err) {
		t.Errorf("volume directory after rm: %v", err)
	}
}

// detachVolumes detaches the host mounts of d's volumes a failed test
// left, so its directory can be removed.
func detachVolumes(t *testing.T, d *daemon) {
	mnts, _ := filepath.Glob(filepath.Join(d.dir, "state", "volumes", "*", "mnt"))
	for _, m := range mnts {
		_ = syscall.Unmount(m, syscall.MNT_DETACH)
	}
}

// restartContainerd SIGKILLs the private containerd and starts it again
// (its shims and sandboxes live on).
func restartContainerd(t *testing.T) {
	t.Helper()
	pid := daemonPid(t)
	syscall.Kill(pid, syscall.SIGKILL)
	for i := 0; i < 100 && syscall.Kill(pid, 0) == nil; i++ {
		time.Sleep(50 * time.Millisecond)
	}
	cmd := exec.Command("bash", filepath.Join("..", "scripts", "containerd.sh"), "start", env.ctrd.Dir)
	cmd.Env = append(os.Environ(), "CONTAINERD_BIN_DIR="+env.ctrd.BinDir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("containerd start: %v %s", err, out)
	}
}

// TestVolumeCap: a volume's size stops dd and fallocate with ENOSPC, and
// the host holds no more than the size for it.
func TestVolumeCap(t *testing.T) {
	vol := newVolume(t, "capped-"+strconv.Itoa(os.Getpid()), "--size", "32m")
	id := newSandbox(t, "--volume", vol.Name+":/data")
	out, stderr, code := boxctlRun("exec", "--timeout", "60s", id, "--", "sh", "-c", "dd if=/dev/zero of=/data/bomb bs=1M count=100 2>&1; sync")
	if !strings.Contains(out+stderr, "No space left on device") {
		t.Errorf("dd of 100 MiB into a 32m volume: exit %d, %q %q; want ENOSPC", code, out, stderr)
	}
	sh(t, id, "rm -f /data/bomb; sync")
	out, stderr, code = boxctlRun("exec", id, "--", "fallocate", "-l", "64m", "/data/big")
	if code == 0 || !strings.Contains(out+stderr, "No space left on device") {
		t.Errorf("fallocate of 64m into a 32m volume: exit %d, %q %q; want ENOSPC", code, out, stderr)
	}
	sh(t, id, "dd if=/dev/zero of=/data/fill bs=1M count=100 2>/dev/null; sync; true")
	img := filepath.Join(env.stateDir, "volumes", vol.Id, "disk.ext4")
	if a := allocated(t, img); a > 36<<20 {
		t.Errorf("volume image occupies %d bytes on the host, more than its 32m", a)
	}
	if v := volumeAt(t, env.socket, vol.Name); v.UsedBytes < 20<<20 || v.UsedBytes > 32<<20 {
		t.Errorf("inspect used %d bytes, want about the 32m written", v.UsedBytes)
	}
}

// TestVolumeSharing: read-only mounts refuse writes; a second read-write
// mount is refused naming the holder (and leaves nothing held), unless the
// volume is shared; rm of a mounted volume needs --force, which shuts the
// volume down under its sandboxes.
func TestVolumeSharing(t *testing.T) {
	tag := strconv.Itoa(os.Getpid())
	vol := newVolume(t, "shared-ds-"+tag)
	other := newVolume(t, "other-"+tag)
	w := newSandbox(t, "--volume", vol.Name+":/data")
	sh(t, w, "echo data > /data/set && sync")
	r := newSandbox(t, "--volume", vol.Name+":/data:ro")
	if got := sh(t, r, "cat /data/set"); got != "data\n" {
		t.Errorf("read-only reader sees %q", got)
	}
	out, stderr, code := boxctlRun("exec", r, "--", "sh", "-c", "echo x > /data/new")
	if code == 0 || !strings.Contains(out+stderr, "Read-only file system") {
		t.Errorf("write through a read-only mount: exit %d %q %q", code, out, stderr)
	}
	// A second writer: refused, naming the volume and the first writer;
	// the other volume it asked for first is not left held.
	_, err := env.api.CreateSandbox(ctx(t), connect.NewRequest(&boxdv1.CreateSandboxRequest{Volumes: []string{other.Name + ":/o", vol.Name + ":/data"}}))
	wantCodeAll(t, "second read-write mount", err, connect.CodeFailedPrecondition, vol.Name, w)
	if v := volumeAt(t, env.socket, other.Name); len(v.Mounts) != 0 {
		t.Errorf("a failed create left volume %s held: %v", other.Name, v.Mounts)
	}
	// gVisor cannot apply ID-mapped mounts: a clear refusal, nothing held.
	_, err = env.api.CreateSandbox(ctx(t), connect.NewRequest(&boxdv1.CreateSandboxRequest{Runtime: "gvisor", Volumes: []string{other.Name + ":/o"}}))
	wantCodeAll(t, "gvisor with a volume", err, connect.CodeFailedPrecondition, "gVisor", "volumes")
	// Shared: two writers.
	sv := newVolume(t, "sv-"+tag, "--shared")
	newSandbox(t, "--volume", sv.Name+":/s")
	newSandbox(t, "--volume", sv.Name+":/s")
	// Bad names and paths.
	for _, bad := range []string{"../x", "a/b", "..", ""} {
		_, err := rpcclient.NewVolumes(env.socket).CreateVolume(ctx(t), connect.NewRequest(&boxdv1.CreateVolumeRequest{Name: bad}))
		wantCode(t, "volume name "+bad, err, connect.CodeInvalidArgument, "name")
	}
	for _, bad := range []string{"../x:/data", vol.Name + ":relative", vol.Name + ":/proc/x", vol.Name + ":/data:rx", vol.Name} {
		_, err := env.api.CreateSandbox(ctx(t), connect.NewRequest(&boxdv1.CreateSandboxRequest{Volumes: []string{bad}}))
		wantCode(t, "--volume "+bad, err, connect.CodeInvalidArgument, "volumes[0]")
	}
	// rm while mounted: refused naming the sandboxes; forced: gone, and
	// the sandboxes' I/O there fails.
	_, stderr, code = boxctlRun("volume", "rm", vol.Name)
	if code == 0 || !strings.Contains(stderr, "failed_precondition") || !strings.Contains(stderr, w) || !strings.Contains(stderr, r) {
		t.Errorf("rm of a mounted volume: exit %d %q", code, stderr)
	}
	if _, stderr, code = boxctlRun("volume", "rm", "--force", vol.Name); code != 0 {
		t.Fatalf("rm --force: %s", stderr)
	}
	if out, _, _ := boxctlRun("volume", "ls"); strings.Contains(out, vol.Name+" ") {
		t.Errorf("volume still listed after rm --force:\n%s", out)
	}
	out, stderr, code = boxctlRun("exec", w, "--", "sh", "-c", "echo more > /data/after")
	if code == 0 {
		t.Errorf("write to a force-removed volume succeeded: %q %q", out, stderr)
	}
	if _, _, code = boxctlRun("exec", r, "--", "cat", "/data/set"); code == 0 {
		t.Errorf("read of a force-removed volume succeeded")
	}
}

// TestVolumeOwnership: another user's volume is not_found in every volume
// call and in create --volume, with the message of a missing one.
func TestVolumeOwnership(t *testing.T) {
	sockGroup, adminGroup, ua, ub, uc := hostUsers(t)
	d := startBoxd(t, namespace+"-volown", true, "--socket-group", sockGroup, "--admin-group", adminGroup, "--max-disk-per-user", "100m", "--default-disk", "16m")
	t.Cleanup(func() { detachVolumes(t, d) })
	if err := os.Chmod(filepath.Dir(d.dir), 0o711); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(d.dir, "boxctl")
	for _, name := range []string{"boxctl", "boxctl-full"} {
		if b, err := os.ReadFile(filepath.Join(filepath.Dir(env.boxctl), name)); err != nil || os.WriteFile(filepath.Join(d.dir, name), b, 0o755) != nil {
			t.Fatalf("copy %s: %v", name, err)
		}
	}
	as := func(u hostUser, args ...string) (string, string, int) {
		out, stderr, code, _ := boxctlAs(t, bin, u, d.sock, args...)
		return out, stderr, code
	}
	if _, stderr, code := as(ua, "volume", "create", "mine", "--size", "32m"); code != 0 {
		t.Fatalf("a's volume create: %s", stderr)
	}
	for _, args := range [][]string{
		{"volume", "inspect", "mine"}, {"volume", "rm", "mine"}, {"volume", "rm", "--force", "mine"},
		{"create", "--volume", "mine:/data"},
		{"volume", "ls-files", "mine"}, {"volume", "stat", "mine:/x"}, {"volume", "cat", "mine:/x"},
	} {
		_, stderr, code := as(ub, args...)
		_, missing, _ := as(ub, append(args[:len(args)-1:len(args)-1], strings.Replace(args[len(args)-1], "mine", "nosuch", 1))...)
		if code == 0 || !strings.Contains(stderr, "not_found") {
			t.Errorf("b's %v on a's volume: exit %d %q, want not_found", args, code, stderr)
		}
		if strings.ReplaceAll(stderr, "mine", "X") != strings.ReplaceAll(missing, "nosuch", "X") {
			t.Errorf("b's %v: %q differs from a missing volume's %q", args, stderr, missing)
		}
	}
	// Volumes count against the owner's disk quota.
	if _, stderr, code := as(ua, "volume", "create", "big", "--size", "80m"); code == 0 || !strings.Contains(stderr, "resource_exhausted") || !strings.Contains(stderr, "volume") {
		t.Errorf("a's 80m volume over a 100m quota holding 32m: exit %d %q", code, stderr)
	}
	if out, _, _ := as(ub, "volume", "ls"); strings.Contains(out, "mine") {
		t.Errorf("b lists a's volume:\n%s", out)
	}
	// b may have a volume of the same name; the admin sees both.
	if _, stderr, code := as(ub, "volume", "create", "mine", "--size", "32m"); code != 0 {
		t.Fatalf("b's volume create of the same name: %s", stderr)
	}
	if out, _, _ := as(uc, "volume", "ls"); strings.Count(out, "mine") != 2 {
		t.Errorf("admin's volume ls:\n%s", out)
	}
	if _, stderr, code := as(ua, "volume", "rm", "mine"); code != 0 {
		t.Errorf("a's rm of its own volume: %s", stderr)
	}
	if _, stderr, code := as(ub, "volume", "rm", "mine"); code != 0 {
		t.Errorf("b's rm of its own volume: %s", stderr)
	}
}

// TestVolumeClone: a snapshot keeps a volume's files as they were; a
// volume made from a snapshot, or from a live volume, starts with those
// files and diverges from its source. It logs the cost of cloning a full
// 1 GiB volume (a copy of its blocks: this host's ext4 has no reflinks).
func TestVolumeClone(t *testing.T) {
	tag := strconv.Itoa(os.Getpid())
	src := newVolume(t, "src-"+tag, "--size", "64m")
	w := newSandbox(t, "--volume", src.Name+":/data")
	sh(t, w, "echo v1 > /data/f && sync")
	if _, stderr, code := boxctlRun("volume", "snapshot", src.Name, "s1"); code != 0 {
		t.Fatalf("snapshot: %s", stderr)
	}
	_, stderr, code := boxctlRun("volume", "snapshot", src.Name, "s1")
	if code == 0 || !strings.Contains(stderr, "already_exists") {
		t.Errorf("second snapshot s1: exit %d %q", code, stderr)
	}
	sh(t, w, "echo v2 > /data/f && sync")
	fromSnap := "c1-" + tag
	if _, stderr, code := boxctlRun("volume", "create", fromSnap, "--from", src.Name+"@s1"); code != 0 {
		t.Fatalf("create --from snapshot: %s", stderr)
	}
	t.Cleanup(func() { boxctlRun("volume", "rm", "--force", fromSnap) })
	live := "c2-" + tag
	if _, stderr, code := boxctlRun("volume", "create", live, "--from", src.Name); code != 0 {
		t.Fatalf("create --from a mounted volume: %s", stderr)
	}
	t.Cleanup(func() { boxctlRun("volume", "rm", "--force", live) })
	r := newSandbox(t, "--volume", fromSnap+":/c1", "--volume", live+":/c2")
	if got := sh(t, r, "cat /c1/f /c2/f"); got != "v1\nv2\n" {
		t.Errorf("clones read %q, want v1 (the snapshot) and v2 (the live copy)", got)
	}
	sh(t, r, "echo mine > /c1/f && echo x > /c2/g && stat -c %u /c1/f")
	if got := sh(t, w, "cat /data/f; ls /data"); got != "v2\nf\n" {
		t.Errorf("source after its clones were written: %q", got)
	}
	if v := volumeAt(t, env.socket, src.Name); len(v.Snapshots) != 1 || v.Snapshots[0] != "s1" {
		t.Errorf("source's snapshots: %v", v.Snapshots)
	}
	_, err := rpcclient.NewVolumes(env.socket).CreateVolume(ctx(t), connect.NewRequest(&boxdv1.CreateVolumeRequest{Name: "c3-" + tag, From: src.Name, Size: "1g"}))
	wantCode(t, "from with a size", err, connect.CodeInvalidArgument, "size")
	_, err = rpcclient.NewVolumes(env.socket).CreateVolume(ctx(t), connect.NewRequest(&boxdv1.CreateVolumeRequest{Name: "c3-" + tag, From: src.Name + "@nosuch"}))
	wantCode(t, "from a missing snapshot", err, connect.CodeNotFound, "nosuch")

	// The cost of a clone of a full 1 GiB volume.
	big := newVolume(t, "big-"+tag, "--size", "1g")
	b := newSandbox(t, "--volume", big.Name+":/b")
	sh(t, b, "dd if=/dev/urandom of=/b/fill bs=1M count=900 2>/dev/null && sync")
	boxctlRun("rm", "-f", b)
	t0 := time.Now()
	if _, stderr, code := boxctlRun("volume", "create", "bigc-"+tag, "--from", big.Name); code != 0 {
		t.Fatalf("clone of 1 GiB: %s", stderr)
	}
	t.Logf("clone of a 1 GiB volume holding 900 MiB: %v", time.Since(t0))
	boxctlRun("volume", "rm", "bigc-"+tag)
}
