//go:build linux

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/containerd/v2/pkg/namespaces"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// TestInitRestartStorm: sandbox root can kill its own init whenever it
// likes (pid 1 ignores SIGKILL from inside its namespace, but SIGTERM ends
// it), and every death makes boxd run runc again. The daemon here allows
// restartLimit restarts a minute: the attacker's kill and then the host's
// kills are restarted, with backoff, up to the limit; the next death leaves
// the sandbox stopped, and inspect, exec and a restarted boxd all say why.
// Another sandbox is untouched and the files of the stopped one are kept.
func TestInitRestartStorm(t *testing.T) {
	bystander := newSandbox(t)
	bystanderPid := inspect(t, bystander).InitPid
	id := newSandbox(t)
	sh(t, id, "echo kept > /workspace/file")

	// The attacker's way first: from inside, as sandbox root.
	pid := inspect(t, id).InitPid
	_, _, _ = boxctlRun("exec", id, "--", "kill", "-TERM", "1")
	pid = waitRestarted(t, id, pid)
	if sb := inspect(t, id); sb.InitRestarts != 1 || sb.LastRestartReason != "init exited with status 0" || sb.LastRestartAt == "" {
		t.Errorf("after the first restart: restarts %d, reason %q, at %q", sb.InitRestarts, sb.LastRestartReason, sb.LastRestartAt)
	}
	// Then from the host, as fast as boxd lets it come back.
	start := time.Now()
	for n := 2; n <= restartLimit; n++ {
		if err := syscall.Kill(int(pid), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		pid = waitRestarted(t, id, pid)
	}
	// Backoff: 1s before the second restart, 2s before the third.
	if d := time.Since(start); d < 3*time.Second {
		t.Errorf("%d restarts took %v: no backoff between them", restartLimit-1, d)
	}
	// A process that left the exec's session would outlive the exec, but
	// not the init: the pid namespace dies with its init, so nothing of
	// the sandbox runs while boxd decides about a restart.
	sh(t, id, "setsid sleep 1000 </dev/null >/dev/null 2>&1 &")
	if n := len(sandboxPids(t, id)); n < 2 {
		t.Errorf("%d processes in the sandbox's cgroup, want the init and the sleeper", n)
	}
	if err := syscall.Kill(int(pid), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	sb := waitRefused(t, id)
	if pids := sandboxPids(t, id); len(pids) != 0 {
		t.Errorf("processes left in the sandbox's cgroup after its init died: %v", pids)
	}
	check := func(when string, sb *boxdv1.Sandbox) {
		t.Helper()
		if sb.State != "stopped" || sb.InitRestarts != restartLimit || !strings.Contains(sb.RestartRefused, "restart limit reached: 3 restarts within 1m0s") ||
			sb.LastRestartReason != "init exited with status 137 (SIGKILL)" {
			t.Errorf("%s: state %s, restarts %d, refused %q, last reason %q", when, sb.State, sb.InitRestarts, sb.RestartRefused, sb.LastRestartReason)
		}
	}
	check("at the limit", sb)
	time.Sleep(3 * time.Second) // ten reconcile passes, past any backoff
	check("3s later", inspect(t, id))

	// Calls that need the init say why it is not there.
	_, err := env.api.Exec(ctx(t), connect.NewRequest(&boxdv1.ExecRequest{SandboxId: id, Args: []string{"true"}}))
	if connect.CodeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), "restart limit reached") {
		t.Errorf("exec in the refused sandbox: %v, want failed_precondition naming the limit", err)
	}
	_, stderr, code := boxctlRun("exec", id, "--", "true")
	if code == 0 || !strings.Contains(stderr, "restart limit reached") {
		t.Errorf("boxctl exec: exit %d, stderr %q", code, stderr)
	}
	out, err := boxctl(nil, "inspect", id)
	var shown struct {
		Restarts int    `json:"init_restarts"`
		Refused  string `json:"restart_refused"`
	}
	if err != nil || json.Unmarshal([]byte(out), &shown) != nil || shown.Restarts != restartLimit || !strings.HasPrefix(shown.Refused, "restart limit reached") {
		t.Errorf("boxctl inspect: %v\n%s", err, out)
	}

	// The refusal is in the sandbox's labels: a restarted boxd keeps it.
	killDaemon()
	if err := startDaemon(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	check("after a boxd restart", inspect(t, id))

	// The daemon and the other sandbox carry on.
	if got := sh(t, bystander, "echo fine"); got != "fine\n" {
		t.Errorf("bystander exec: %q", got)
	}
	if sb := inspect(t, bystander); sb.InitPid != bystanderPid || sb.InitRestarts != 0 || sb.RestartRefused != "" {
		t.Errorf("bystander: pid %d (was %d), restarts %d, refused %q", sb.InitPid, bystanderPid, sb.InitRestarts, sb.RestartRefused)
	}
	if got := snapshotFile(t, id, "workspace/file"); got != "kept\n" {
		t.Errorf("file in the stopped sandbox = %q", got)
	}
}

// TestRestartRefusesTamperedRootfs: sandbox root cannot rename the mount
// points runc made (/tmp, /proc, /dev: EBUSY), but it can rename /.boxd,
// which only holds them, and put a symlink in its place; or replace the
// workdir with one. runc would follow such a link while it mounts the init
// and the channel and execs the init on the next start. boxd checks the
// dead sandbox's rootfs before it runs runc, and refuses: the sandbox stays
// stopped with its files, inspect and exec name the path, the host
// directory the link points at is untouched, and the reconciler goes on
// restarting other sandboxes (a FIFO at /etc/passwd used to hang it).
func TestRestartRefusesTamperedRootfs(t *testing.T) {
	trap := t.TempDir()
	if err := os.WriteFile(filepath.Join(trap, "bait"), []byte("bait\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, script, want string
	}{
		// The mv proves the point: /.boxd holds the init's mount points and
		// still moves.
		{"boxd dir", "mv /.boxd /.boxd-old && ln -s /proc/self/fd/7/../../../../.." + trap + " /.boxd", "rootfs tampered: /.boxd is a symlink"},
		{"workdir", "cd / && rm -rf /workspace && ln -s /proc/sys /workspace", "rootfs tampered: /workspace is a symlink"},
		// runc reads /etc/passwd as it starts the init: a FIFO there would
		// block it, and with it boxd's reconciler, for good.
		{"passwd fifo", "rm /etc/passwd && mkfifo /etc/passwd", "rootfs tampered: /etc/passwd is a fifo, not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := newSandbox(t)
			sh(t, id, "echo kept > /root/file")
			if _, _, code := boxctlRun("exec", id, "--", "sh", "-c", "mv /tmp /tmp2 || mv /proc /p2 || mv /dev /d2"); code == 0 {
				t.Errorf("sandbox root renamed a mount point")
			}
			sh(t, id, tc.script)
			pid := inspect(t, id).InitPid
			if err := syscall.Kill(int(pid), syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			sb := waitRefused(t, id)
			if sb.RestartRefused != tc.want || sb.State != "stopped" {
				t.Errorf("refused %q, state %s; want %q, stopped", sb.RestartRefused, sb.State, tc.want)
			}
			time.Sleep(2 * time.Second) // no retries: it stays refused
			if sb := inspect(t, id); sb.RestartRefused != tc.want || sb.State != "stopped" || sb.InitRestarts != 1 {
				t.Errorf("2s later: refused %q, state %s, restarts %d", sb.RestartRefused, sb.State, sb.InitRestarts)
			}
			_, err := env.api.Exec(ctx(t), connect.NewRequest(&boxdv1.ExecRequest{SandboxId: id, Args: []string{"true"}}))
			if connect.CodeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("exec: %v, want failed_precondition naming %q", err, tc.want)
			}
			if got := snapshotFile(t, id, "root/file"); got != "kept\n" {
				t.Errorf("file in the refused sandbox = %q", got)
			}
		})
	}
	// The reconciler is still at work: another sandbox's dead init comes
	// back.
	other := newSandbox(t)
	pid := inspect(t, other).InitPid
	if err := syscall.Kill(int(pid), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitRestarted(t, other, pid)

	ents, err := os.ReadDir(trap)
	if err != nil || len(ents) != 1 || ents[0].Name() != "bait" {
		t.Errorf("trap directory changed: %v %v", ents, err)
	}
	if b, _ := os.ReadFile(filepath.Join(trap, "bait")); string(b) != "bait\n" {
		t.Errorf("bait = %q", b)
	}
}

// waitRestarted waits for a new init (another pid, running, answering)
// and returns its pid.
func waitRestarted(t *testing.T, id string, old int64) int64 {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		sb := inspect(t, id)
		if sb.State == "running" && sb.InitPid != old && sb.InitPid != 0 {
			sh(t, id, "true") // waits for the restart to finish
			return sb.InitPid
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s not restarted: state %s pid %d refused %q", id, sb.State, sb.InitPid, sb.RestartRefused)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitRefused waits until boxd reports that it will not restart id.
func waitRefused(t *testing.T, id string) *boxdv1.Sandbox {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		sb := inspect(t, id)
		if sb.RestartRefused != "" {
			return sb
		}
		if time.Now().After(deadline) {
			t.Fatalf("boxd did not refuse to restart %s: state %s pid %d restarts %d", id, sb.State, sb.InitPid, sb.InitRestarts)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// snapshotFile reads a file from a stopped sandbox's writable layer on the
// host, mounted read-only (rel must not pass through sandbox-made links).
func snapshotFile(t *testing.T, id, rel string) string {
	t.Helper()
	c := namespaces.WithNamespace(ctx(t), namespace)
	ctr, err := env.ctr.LoadContainer(c, id)
	if err != nil {
		t.Fatal(err)
	}
	info, err := ctr.Info(c)
	if err != nil {
		t.Fatal(err)
	}
	mounts, err := env.ctr.SnapshotService(info.Snapshotter).Mounts(c, info.SnapshotKey)
	if err != nil {
		t.Fatal(err)
	}
	var b []byte
	err = mount.WithReadonlyTempMount(c, mount.RemoveIDMapOption(mounts), func(root string) error {
		var rerr error
		b, rerr = os.ReadFile(filepath.Join(root, rel))
		return rerr
	})
	if err != nil {
		t.Errorf("read %s from the snapshot of %s: %v", rel, id, err)
	}
	return string(b)
}

// sandboxPids lists the processes in a sandbox's cgroup (none if the cgroup
// is gone).
func sandboxPids(t *testing.T, id string) []string {
	t.Helper()
	dir := "/sys/fs/cgroup/pids/" + namespace + "/" + id // v1
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		dir = "/sys/fs/cgroup/" + namespace + "/" + id
	}
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}
