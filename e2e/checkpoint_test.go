//go:build linux

package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/containerd/cgroups/v3"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// ckSandbox starts a gVisor sandbox with the state a checkpoint must
// carry: a background counter loop (a process whose count lives in a shell
// variable), a session with a cd and an exported variable, and a blob of
// random bytes in a tmpfs (memory of the sandbox's kernel). It returns the
// sandbox and the blob's checksum.
func ckSandbox(t *testing.T, blobMiB int) (string, string) {
	t.Helper()
	id := newSandbox(t, "--runtime", "gvisor", "--memory", "512m", "--disk", "256m", "--tmpfs", "/dev/shm:300m")
	if _, err := boxctl(nil, "exec", "-d", id, "--", "sh", "-c",
		"i=0; while :; do i=$((i+1)); echo $i > /tmp/count.new; mv /tmp/count.new /tmp/count; sleep 0.05; done"); err != nil {
		t.Fatal(err)
	}
	if _, err := boxctl(nil, "session", "create", id, "s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := boxctl(nil, "session", "exec", id, "s1", "cd /etc; export CK=kept"); err != nil {
		t.Fatal(err)
	}
	sum := strings.Fields(sh(t, id, "head -c "+strconv.Itoa(blobMiB<<20)+" /dev/urandom > /dev/shm/blob && md5sum /dev/shm/blob"))[0]
	waitCount(t, id, 5)
	return id, sum
}

// count reads the background loop's counter.
func count(t *testing.T, id string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimSpace(sh(t, id, "cat /tmp/count")))
	if err != nil {
		t.Fatalf("counter: %v", err)
	}
	return n
}

func waitCount(t *testing.T, id string, above int) int {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if n := count(t, id); n > above {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("the counter of %s did not pass %d", id, above)
		}
	}
}

// ckCheckCarried: after a restore the same processes go on: the counter
// continues from where it was (not from 0: a fresh start would), the
// session keeps its directory and variable, the blob is intact.
func ckCheckCarried(t *testing.T, id, sum string, before int) {
	t.Helper()
	if n := waitCount(t, id, before); n < before {
		t.Errorf("counter %d after restore, was %d", n, before)
	}
	if out, err := boxctl(nil, "session", "exec", id, "s1", "pwd; echo $CK"); err != nil || out != "/etc\nkept\n" {
		t.Errorf("session after restore: %q %v", out, err)
	}
	if got := strings.Fields(sh(t, id, "md5sum /dev/shm/blob"))[0]; got != sum {
		t.Errorf("blob md5 %s after restore, want %s", got, sum)
	}
}

func checkpoint(t *testing.T, id string, args ...string) {
	t.Helper()
	if out, err := boxctl(nil, append(append([]string{"checkpoint"}, args...), id)...); err != nil {
		t.Fatalf("checkpoint %s: %v: %s", id, err, out)
	}
}

func memCgroupDir(id string) string {
	if cgroups.Mode() == cgroups.Unified {
		return filepath.Join("/sys/fs/cgroup", namespace, id)
	}
	return filepath.Join("/sys/fs/cgroup/memory", namespace, id)
}

func memAvailable(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemAvailable:" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n << 10
		}
	}
	t.Fatal("no MemAvailable in /proc/meminfo")
	return 0
}

// TestCheckpointRestore: a gVisor sandbox checkpointed to disk frees its
// memory (its cgroup is gone, the host's MemAvailable rises by most of
// what it used), shows state checkpointed with its size, refuses exec,
// survives a boxd SIGKILL and restart, and restores with the same id and
// its processes, session and memory; --leave-running keeps it running.
func TestCheckpointRestore(t *testing.T) {
	id, sum := ckSandbox(t, 160)
	usage := inspect(t, id).Usage.GetMemoryBytes()
	before := count(t, id)
	avail := memAvailable(t)
	start := time.Now()
	checkpoint(t, id)
	t.Logf("checkpoint of %d MiB in use: %v", usage>>20, time.Since(start))
	// MemAvailable is the host's: other tests come and go meanwhile, and
	// the sandbox's memory is returned over a moment. The best of a few
	// readings in the next 5 s counts.
	freed := memAvailable(t) - avail
	for deadline := time.Now().Add(5 * time.Second); freed < int64(usage)*8/10 && time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		freed = max(freed, memAvailable(t)-avail)
	}
	if _, err := os.Stat(memCgroupDir(id)); !os.IsNotExist(err) {
		t.Errorf("the sandbox's memory cgroup %s is still there (%v)", memCgroupDir(id), err)
	}
	if freed < int64(usage)*8/10 {
		t.Errorf("MemAvailable rose by %d MiB, want at least 80%% of the %d MiB the sandbox used", freed>>20, usage>>20)
	}
	sb := inspect(t, id)
	if sb.State != "checkpointed" || sb.CheckpointBytes < 160<<20 || sb.CheckpointedAt == "" || sb.CheckpointPause == "" {
		t.Fatalf("inspect after checkpoint: state %q, %d bytes, at %q, pause %q", sb.State, sb.CheckpointBytes, sb.CheckpointedAt, sb.CheckpointPause)
	}
	if _, stderr, code := boxctlRun("exec", id, "--", "true"); code == 0 || !strings.Contains(stderr, "failed_precondition") {
		t.Errorf("exec on a checkpointed sandbox: exit %d, %s", code, stderr)
	}
	if _, stderr, code := boxctlRun("start", id); code == 0 || !strings.Contains(stderr, "checkpointed") {
		t.Errorf("start on a checkpointed sandbox: exit %d, %s", code, stderr)
	}

	killDaemon()
	if err := startDaemon(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // a reconcile pass must not touch it
	if sb := inspect(t, id); sb.State != "checkpointed" {
		t.Fatalf("after a boxd restart: state %q", sb.State)
	}
	start = time.Now()
	if out, err := boxctl(nil, "restore", id); err != nil {
		initLog, _ := os.ReadFile(filepath.Join(env.stateDir, "sandboxes", id, "init.log"))
		t.Fatalf("restore: %v: %s\ninit log:\n%s\nboxd log:\n%s", err, out, initLog, tail(env.daemonLog))
	}
	t.Logf("restore: %v", time.Since(start))
	if sb := inspect(t, id); sb.State != "running" || sb.CheckpointBytes != 0 {
		t.Errorf("after restore: state %q, checkpoint %d bytes", sb.State, sb.CheckpointBytes)
	}
	ckCheckCarried(t, id, sum, before)

	t.Run("leave-running", func(t *testing.T) {
		n := count(t, id)
		checkpoint(t, id, "--leave-running")
		if sb := inspect(t, id); sb.State != "running" {
			t.Fatalf("after --leave-running: state %q", sb.State)
		}
		ckCheckCarried(t, id, sum, n)
	})
}

// TestCheckpointTamperedRefused: a checkpoint file changed on disk (one
// byte of the memory image) is refused at restore before runsc reads it
// (failed_precondition naming the integrity check), the sandbox stays
// checkpointed, and once the byte is back the restore works.
func TestCheckpointTamperedRefused(t *testing.T) {
	id := newSandbox(t, "--runtime", "gvisor", "--memory", "256m", "--disk", "64m")
	if _, err := boxctl(nil, "exec", "-d", id, "--", "sh", "-c",
		"i=0; while :; do i=$((i+1)); echo $i > /tmp/count.new; mv /tmp/count.new /tmp/count; sleep 0.05; done"); err != nil {
		t.Fatal(err)
	}
	before := waitCount(t, id, 3)
	checkpoint(t, id)
	img := filepath.Join(env.stateDir, "sandboxes", id, "checkpoint", "image")
	ents, err := os.ReadDir(img)
	if err != nil || len(ents) == 0 {
		t.Fatalf("checkpoint image %s: %v %v", img, ents, err)
	}
	// The largest file: the memory pages.
	var victim string
	var size int64
	for _, e := range ents {
		if fi, err := e.Info(); err == nil && fi.Size() > size {
			victim, size = filepath.Join(img, e.Name()), fi.Size()
		}
	}
	f, err := os.OpenFile(victim, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	off := size / 2
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{b[0] ^ 0xff}, off); err != nil {
		t.Fatal(err)
	}
	_, err = env.api.RestoreSandbox(ctx(t), connect.NewRequest(&boxdv1.RestoreSandboxRequest{Id: id}))
	if connect.CodeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), "integrity") || !strings.Contains(err.Error(), filepath.Base(victim)) {
		t.Fatalf("restore of a tampered checkpoint: %v; want failed_precondition naming the integrity check and %s", err, filepath.Base(victim))
	}
	if sb := inspect(t, id); sb.State != "checkpointed" {
		t.Fatalf("after the refused restore: state %q, want checkpointed", sb.State)
	}
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
	// exec --resume restores a checkpointed sandbox first.
	if out, err := boxctl(nil, "exec", "--resume", id, "--", "cat", "/tmp/count"); err != nil {
		t.Fatalf("exec --resume of the repaired checkpoint: %v: %s", err, out)
	}
	if n := waitCount(t, id, before); n < before {
		t.Errorf("counter %d after restore, was %d", n, before)
	}
}

// TestCheckpointOverBudget: a sandbox whose memory limit plus disk cap
// does not fit under --max-checkpoint-bytes (16 GiB by default) is
// refused with resource_exhausted and keeps running as it was, with no
// checkpoint left on disk; a runc sandbox is failed_precondition naming
// why. (The test daemon gives every sandbox a memory limit and a disk cap,
// so the refusal of a sandbox without them is not reachable here.)
func TestCheckpointOverBudget(t *testing.T) {
	id := newSandbox(t, "--runtime", "gvisor", "--memory", "12g", "--disk", "5g")
	if _, err := boxctl(nil, "exec", "-d", id, "--", "sh", "-c",
		"i=0; while :; do i=$((i+1)); echo $i > /tmp/count.new; mv /tmp/count.new /tmp/count; sleep 0.05; done"); err != nil {
		t.Fatal(err)
	}
	before := waitCount(t, id, 3)
	_, err := env.api.CheckpointSandbox(ctx(t), connect.NewRequest(&boxdv1.CheckpointSandboxRequest{Id: id}))
	if connect.CodeOf(err) != connect.CodeResourceExhausted || !strings.Contains(err.Error(), "--max-checkpoint-bytes") {
		t.Fatalf("checkpoint over budget: %v; want resource_exhausted naming --max-checkpoint-bytes", err)
	}
	if sb := inspect(t, id); sb.State != "running" {
		t.Errorf("after the refusal: state %q", sb.State)
	}
	waitCount(t, id, before)
	if _, err := os.Stat(filepath.Join(env.stateDir, "sandboxes", id, "checkpoint")); !os.IsNotExist(err) {
		t.Errorf("a refused checkpoint left its directory (%v)", err)
	}

	runc := newSandbox(t, "--memory", "64m", "--disk", "64m")
	_, err = env.api.CheckpointSandbox(ctx(t), connect.NewRequest(&boxdv1.CheckpointSandboxRequest{Id: runc}))
	if connect.CodeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), "CRIU") {
		t.Errorf("checkpoint of a runc sandbox: %v; want failed_precondition naming CRIU", err)
	}
}
