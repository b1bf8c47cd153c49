//go:build linux

package e2e

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/containerd/cgroups/v3"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// cgroupValue reads one of a sandbox's kernel cgroup files: v1 names the
// controller and file of cgroup v1, v2 the file of cgroup v2.
func cgroupValue(t *testing.T, id, v1ctrl, v1file, v2file string) string {
	t.Helper()
	p := filepath.Join("/sys/fs/cgroup", namespace, id, v2file)
	if cgroups.Mode() != cgroups.Unified {
		p = filepath.Join("/sys/fs/cgroup", v1ctrl, namespace, id, v1file)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("cgroup file: %v", err)
	}
	return strings.TrimSpace(string(b))
}

func wantErrCode(t *testing.T, what string, err error, code connect.Code, field string) {
	t.Helper()
	if connect.CodeOf(err) != code || (field != "" && !strings.Contains(err.Error(), field)) {
		t.Errorf("%s: %v, want %s naming %q", what, err, code, field)
	}
}

// A foreground exec reports its pid, can return stdout and stderr as one
// stream in the order written, and says oom_killed only when the kernel's
// OOM killer killed it.
func TestExecResults(t *testing.T) {
	id := newSandbox(t, "--memory", "48m")
	resp, err := env.api.Exec(ctx(t), connect.NewRequest(&boxdv1.ExecRequest{SandboxId: id, Args: []string{"sh", "-c", "echo $$"}}))
	if err != nil {
		t.Fatal(err)
	}
	if pid, _ := strconv.ParseInt(strings.TrimSpace(string(resp.Msg.Stdout)), 10, 64); pid <= 1 || pid != resp.Msg.Result.Pid {
		t.Errorf("result pid %d, the command said %q", resp.Msg.Result.Pid, resp.Msg.Stdout)
	}

	resp, err = env.api.Exec(ctx(t), connect.NewRequest(&boxdv1.ExecRequest{SandboxId: id, CombinedOutput: true,
		Args: []string{"sh", "-c", "echo 1; echo 2 >&2; echo 3; echo 4 >&2"}}))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(resp.Msg.Result.Output); got != "1\n2\n3\n4\n" || len(resp.Msg.Stdout)+len(resp.Msg.Stderr) != 0 {
		t.Errorf("combined output %q (stdout %q stderr %q), want 1-4 in order", got, resp.Msg.Stdout, resp.Msg.Stderr)
	}

	// kill -9 is SIGKILL without the OOM killer.
	resp, err = env.api.Exec(ctx(t), connect.NewRequest(&boxdv1.ExecRequest{SandboxId: id, Args: []string{"sh", "-c", "kill -9 $$"}}))
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.Msg.Result; r.Signal != "SIGKILL" || r.OomKilled {
		t.Errorf("kill -9: signal %q oom_killed %v, want SIGKILL and false", r.Signal, r.OomKilled)
	}
	// A shell that grows a variable past the 48m limit.
	resp, err = env.api.Exec(ctx(t), connect.NewRequest(&boxdv1.ExecRequest{SandboxId: id,
		Args: []string{"sh", "-c", `x=$(head -c 200000000 /dev/zero | tr '\0' a); echo ${#x}`}}))
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.Msg.Result; !r.OomKilled || r.Signal != "SIGKILL" {
		t.Errorf("memory hog: exit %d signal %q oom_killed %v, want oom_killed", r.ExitCode, r.Signal, r.OomKilled)
	}
	// The process service's exec (boxctl exec) says so too, with the pid.
	pc := startExec(t, ctx(t), &boxdv1.ProcessSpec{SandboxId: id, Args: []string{"sh", "-c", `x=$(head -c 200000000 /dev/zero | tr '\0' a)`}})
	if r := pc.result(); !r.OomKilled || r.Pid <= 1 {
		t.Errorf("process exec of the memory hog: %+v, want oom_killed and a pid", r)
	}
	pc = startExec(t, ctx(t), &boxdv1.ProcessSpec{SandboxId: id, Args: []string{"sh", "-c", "kill -9 $$"}})
	if r := pc.result(); r.OomKilled || r.Signal != "SIGKILL" {
		t.Errorf("process exec of kill -9: %+v, want SIGKILL without oom_killed", r)
	}
	// boxctl says so on stderr, through its fast path and through the
	// full CLI, and fails.
	hog := []string{"exec", id, "--", "sh", "-c", `x=$(head -c 200000000 /dev/zero | tr '\0' a)`}
	for _, bin := range []string{env.boxctl, fullCLI()} {
		cmd := exec.Command(bin, append([]string{"--socket", env.socket}, hog...)...)
		cmd.Env = append(os.Environ(), "BOXCTL_NO_FULL=1")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() == 0 || !strings.Contains(stderr.String(), "ran out of memory (oom_killed)") {
			t.Errorf("%s exec of the memory hog: %v, stderr %q; want a failed exit and the oom_killed line", filepath.Base(bin), err, stderr.String())
		}
	}
	if sb := inspect(t, id); sb.Usage.GetOomKills() == 0 {
		t.Errorf("inspect counts no OOM kill")
	}
	// A stop and start gives the sandbox a new cgroup, whose counter boxd
	// must read (not the old cgroup's file, which it kept open).
	if _, err := env.api.StopSandbox(ctx(t), connect.NewRequest(&boxdv1.StopSandboxRequest{SandboxId: id})); err != nil {
		t.Fatal(err)
	}
	if _, err := env.api.StartSandbox(ctx(t), connect.NewRequest(&boxdv1.StartSandboxRequest{SandboxId: id})); err != nil {
		t.Fatal(err)
	}
	resp, err = env.api.Exec(ctx(t), connect.NewRequest(&boxdv1.ExecRequest{SandboxId: id,
		Args: []string{"sh", "-c", `x=$(head -c 200000000 /dev/zero | tr '\0' a); echo ${#x}`}}))
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.Msg.Result; !r.OomKilled || r.Signal != "SIGKILL" {
		t.Errorf("memory hog after a stop and start: exit %d signal %q oom_killed %v, want oom_killed", r.ExitCode, r.Signal, r.OomKilled)
	}
	// The process's own life as the init measured it: at least the sleep,
	// at most the whole call.
	start := time.Now()
	resp, err = env.api.Exec(ctx(t), connect.NewRequest(&boxdv1.ExecRequest{SandboxId: id, Args: []string{"sleep", "0.2"}}))
	if err != nil {
		t.Fatal(err)
	}
	if p := time.Duration(resp.Msg.Result.ProcessUsec) * time.Microsecond; p < 200*time.Millisecond || p > time.Since(start) {
		t.Errorf("process_usec %v for sleep 0.2 in a call of %v", p, time.Since(start))
	}
}

// update changes the live cgroup, the TTL and the defaults of later
// commands, and all of it survives a boxd SIGKILL and restart.
func TestUpdateSandbox(t *testing.T) {
	id := newSandbox(t, "--memory", "64m", "--cpus", "1", "--pids", "64", "--ttl", "1h")
	before := inspect(t, id)
	out, err := boxctl(nil, "update", "--memory", "96m", "--cpus", "0.5", "--pids", "100", "--extend", "30m",
		"--env", "FOO=bar", "--workdir", "/srv/app", id)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `"100663296"`) {
		t.Errorf("update printed %s", out)
	}
	check := func(when string) {
		t.Helper()
		if got := cgroupValue(t, id, "memory", "memory.limit_in_bytes", "memory.max"); got != strconv.Itoa(96<<20) {
			t.Errorf("%s: memory limit %s, want %d", when, got, 96<<20)
		}
		quota := cgroupValue(t, id, "cpu", "cpu.cfs_quota_us", "cpu.max")
		if quota != "50000" && !strings.HasPrefix(quota, "50000 ") {
			t.Errorf("%s: cpu quota %q, want 50000", when, quota)
		}
		if got := cgroupValue(t, id, "pids", "pids.max", "pids.max"); got != "100" {
			t.Errorf("%s: pids.max %s, want 100", when, got)
		}
		sb := inspect(t, id)
		old, _ := time.Parse(time.RFC3339, before.ExpiresAt)
		now, _ := time.Parse(time.RFC3339, sb.ExpiresAt)
		if now.Sub(old) != 30*time.Minute || sb.MemoryBytes != 96<<20 || sb.Pids != 100 || sb.Cpus != 0.5 || sb.Workdir != "/srv/app" {
			t.Errorf("%s: inspect %s %d %d %v %s, want expiry 30m later, 96m, 100, 0.5, /srv/app", when, sb.ExpiresAt, sb.MemoryBytes, sb.Pids, sb.Cpus, sb.Workdir)
		}
		if got := sh(t, id, "echo $FOO; pwd"); got != "bar\n/srv/app\n" {
			t.Errorf("%s: later command sees %q", when, got)
		}
	}
	check("after update")
	killDaemon()
	if err := startDaemon(); err != nil {
		t.Fatal(err)
	}
	check("after boxd restart")

	// A restarted init gets them from the stored spec.
	if err := syscall.Kill(int(inspect(t, id).InitPid), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for inspect(t, id).InitRestarts == 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if inspect(t, id).InitRestarts == 0 {
		t.Fatal("the init was not restarted")
	}
	sh(t, id, "true") // waits for the restart to finish
	check("after init restart")

	// Bad input changes nothing.
	api := env.api
	for _, tc := range []struct {
		req   *boxdv1.UpdateSandboxRequest
		field string
	}{
		{&boxdv1.UpdateSandboxRequest{Ttl: "800h"}, "ttl"},
		{&boxdv1.UpdateSandboxRequest{Extend: "719h"}, "extend"},
		{&boxdv1.UpdateSandboxRequest{Ttl: "1h", Extend: "1h"}, "extend"},
		{&boxdv1.UpdateSandboxRequest{Limits: &boxdv1.Limits{Memory: "1k"}}, "limits.memory"},
		{&boxdv1.UpdateSandboxRequest{Limits: &boxdv1.Limits{Pids: 2}, Ttl: "5h"}, "limits.pids"},
		{&boxdv1.UpdateSandboxRequest{Env: []string{"1BAD=x"}}, "env"},
		{&boxdv1.UpdateSandboxRequest{Workdir: "rel"}, "workdir"},
	} {
		tc.req.SandboxId = id
		_, err := api.UpdateSandbox(ctx(t), connect.NewRequest(tc.req))
		wantErrCode(t, "update "+tc.field, err, connect.CodeInvalidArgument, tc.field)
	}
	check("after bad updates")
}

// stop ends every process and keeps the files; nothing brings the sandbox
// back but start, not the reconciler and not a boxd restart.
func TestStopStart(t *testing.T) {
	id := newSandbox(t)
	sh(t, id, "echo kept > /workspace/f")
	if _, err := boxctl(nil, "exec", "-d", id, "--", "sleep", "1000"); err != nil {
		t.Fatal(err)
	}
	if _, err := boxctl(nil, "stop", "--time", "5s", id); err != nil {
		t.Fatal(err)
	}
	sb := inspect(t, id)
	if sb.State != "stopped" || sb.StoppedAt == "" {
		t.Fatalf("after stop: state %q stopped_at %q", sb.State, sb.StoppedAt)
	}
	_, err := env.api.Exec(ctx(t), connect.NewRequest(&boxdv1.ExecRequest{SandboxId: id, Args: []string{"true"}}))
	wantErrCode(t, "exec in a stopped sandbox", err, connect.CodeFailedPrecondition, "stopped")
	_, err = env.api.StopSandbox(ctx(t), connect.NewRequest(&boxdv1.StopSandboxRequest{SandboxId: id}))
	wantErrCode(t, "stop of a stopped sandbox", err, connect.CodeFailedPrecondition, "stopped")

	killDaemon()
	if err := startDaemon(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // a few reconcile passes (--expiry-interval 300ms)
	if sb := inspect(t, id); sb.State != "stopped" || sb.InitRestarts != 0 {
		t.Fatalf("the stopped sandbox was revived: state %q restarts %d", sb.State, sb.InitRestarts)
	}

	if _, err := boxctl(nil, "start", id); err != nil {
		t.Fatal(err)
	}
	if sb := inspect(t, id); sb.State != "running" || sb.StoppedAt != "" {
		t.Fatalf("after start: state %q stopped_at %q", sb.State, sb.StoppedAt)
	}
	if got := sh(t, id, "cat /workspace/f; pgrep sleep || echo no-sleep"); got != "kept\nno-sleep\n" {
		t.Errorf("after start: %q, want the file and no old process", got)
	}
	_, err = env.api.StartSandbox(ctx(t), connect.NewRequest(&boxdv1.StartSandboxRequest{SandboxId: id}))
	wantErrCode(t, "start of a running sandbox", err, connect.CodeFailedPrecondition, "not stopped")
}

// rm gives every process SIGTERM and a grace period before SIGKILL: a
// command that traps SIGTERM gets to run its handler.
func TestGracefulDelete(t *testing.T) {
	out, err := boxctl(nil, "create")
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(out)
	c := ctx(t)
	stream, err := env.api.ExecStream(c, connect.NewRequest(&boxdv1.ExecRequest{SandboxId: id,
		Args: []string{"sh", "-c", `trap 'echo got-term; exit 7' TERM; echo ready; while :; do sleep 0.1; done`}}))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got strings.Builder
	var exit *boxdv1.ExecResult
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		once := sync.OnceFunc(func() { close(ready) })
		for stream.Receive() {
			mu.Lock()
			got.Write(stream.Msg().GetStdout())
			if r := stream.Msg().GetResult(); r != nil {
				exit = r
			}
			if strings.Contains(got.String(), "ready") {
				once()
			}
			mu.Unlock()
		}
		done <- stream.Err()
	}()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatal("the command did not start")
	}
	t0 := time.Now()
	if _, err := boxctl(nil, "rm", "--time", "20s", id); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t0); d > 15*time.Second {
		t.Errorf("rm took %s: it waited out the grace period though the command exited", d)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the stream did not end")
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(got.String(), "got-term") || exit == nil || exit.ExitCode != 7 {
		t.Errorf("output %q, result %v: want the TERM handler's line and exit 7", got.String(), exit)
	}
	assertGone(t, id)
}

// rm --label removes exactly the sandboxes carrying the label; create
// --replace swaps a named sandbox for a new one.
func TestRmByLabelAndReplace(t *testing.T) {
	a1 := newSandbox(t, "--label", "grp=settings-a")
	a2 := newSandbox(t, "--label", "grp=settings-a", "--label", "x=y")
	b := newSandbox(t, "--label", "grp=settings-b")
	out, err := boxctl(nil, "rm", "--force", "--label", "grp=settings-a")
	if err != nil {
		t.Fatal(err)
	}
	if f := strings.Fields(out); len(f) != 2 || !contains(f, a1) || !contains(f, a2) {
		t.Errorf("rm --label printed %q, want %s and %s", out, a1, a2)
	}
	assertGone(t, a1)
	assertGone(t, a2)
	if sb := inspect(t, b); sb.State != "running" {
		t.Errorf("the sandbox without the label is %s", sb.State)
	}

	old := newSandbox(t, "--name", "settings-replace")
	_, stderr, code := boxctlRun("create", "--name", "settings-replace")
	if code == 0 || !strings.Contains(stderr, "already_exists") {
		t.Errorf("create of a taken name: exit %d %q", code, stderr)
	}
	nu := newSandbox(t, "--name", "settings-replace", "--replace")
	if nu == old {
		t.Fatal("replace returned the old sandbox")
	}
	assertGone(t, old)
	if sb := inspect(t, "settings-replace"); sb.Id != nu {
		t.Errorf("the name points at %s, want %s", sb.Id, nu)
	}
}

// Each tunable is visible from inside the sandbox (or in its cgroup) and
// in inspect; values beyond boxd's ceilings are refused, naming the field,
// and nothing is made.
func TestTunables(t *testing.T) {
	id := newSandbox(t, "--memory", "128m", "--read-only", "--tmpfs", "/cache:8m", "--tmpfs", "/tmp:16m", "--tmpfs", "/dev/shm:2m",
		"--ulimit", "nofile=2048,nproc=500", "--ulimit", "cpu=100", "--hostname", "box-1.test", "--cpu-weight", "500",
		"--memory-low", "32m", "--exec-timeout", "2s", "--output-limit", "100")
	if out, _, code := boxctlRun("exec", id, "--", "touch", "/x"); code == 0 {
		t.Errorf("touch / on a read-only rootfs succeeded: %q", out)
	}
	if got := sh(t, id, "touch /workspace/x /cache/x /tmp/x && echo rw"); got != "rw\n" {
		t.Errorf("the tmpfs mounts are not writable: %q", got)
	}
	mounts := procMounts(t, id)
	for _, want := range []string{"tmpfs /cache tmpfs rw,nosuid,nodev,relatime,size=8192k", " /tmp tmpfs ", "size=16384k", " /dev/shm tmpfs ", "size=2048k", "overlay / overlay ro,"} {
		if !strings.Contains(mounts, want) {
			t.Errorf("/proc/mounts lacks %q:\n%s", want, mounts)
		}
	}
	if got := sh(t, id, "ulimit -n; ulimit -u; ulimit -t; hostname"); got != "2048\n500\n100\nbox-1.test\n" {
		t.Errorf("ulimits and hostname inside: %q", got)
	}
	if got := cgroupValue(t, id, "memory", "memory.soft_limit_in_bytes", "memory.low"); got != strconv.Itoa(32<<20) {
		t.Errorf("memory low %s, want %d", got, 32<<20)
	}
	if cgroups.Mode() == cgroups.Unified {
		if got := cgroupValue(t, id, "", "", "cpu.weight"); got != "500" {
			t.Errorf("cpu.weight %s, want 500", got)
		}
	} else if got := cgroupValue(t, id, "cpu", "cpu.shares", ""); got != "13085" {
		t.Errorf("cpu.shares %s, want 13085 (weight 500)", got)
	}
	// The default exec timeout and output cap apply when a request has none.
	resp, err := env.api.Exec(ctx(t), connect.NewRequest(&boxdv1.ExecRequest{SandboxId: id, Args: []string{"sleep", "30"}}))
	if err != nil || !resp.Msg.Result.TimedOut {
		t.Errorf("sleep 30 with a default timeout of 2s: %v %v", err, resp.Msg.GetResult())
	}
	resp, err = env.api.Exec(ctx(t), connect.NewRequest(&boxdv1.ExecRequest{SandboxId: id, Args: []string{"sh", "-c", "head -c 1000 /dev/zero"}}))
	if err != nil || len(resp.Msg.Stdout) != 100 || !resp.Msg.Result.Truncated {
		t.Errorf("1000 bytes with a default cap of 100: %v %d", err, len(resp.Msg.GetStdout()))
	}
	sb := inspect(t, id)
	if !sb.Security.ReadOnlyRootfs || len(sb.Tmpfs) != 3 || sb.Ulimits.Nofile != 2048 || sb.Ulimits.Nproc != 500 || sb.Ulimits.CpuSeconds != 100 ||
		sb.Hostname != "box-1.test" || sb.CpuWeight != 500 || sb.MemoryLowBytes != 32<<20 || sb.ExecTimeout != "2s" || sb.OutputLimit != 100 {
		t.Errorf("inspect: %+v", sb)
	}

	n := countSandboxes(t)
	for _, tc := range []struct {
		args  []string
		field string
	}{
		{[]string{"--tmpfs", "/proc/sys:1m"}, "tmpfs"},
		{[]string{"--tmpfs", "/.boxd/run"}, "tmpfs"},
		{[]string{"--memory", "64m", "--tmpfs", "/big:1g"}, "tmpfs"},
		{[]string{"--ulimit", "nofile=lots"}, "ulimits"},
		{[]string{"--ulimit", "nofile=99999999"}, "ulimits"},
		{[]string{"--ulimit", "core=1"}, "ulimits"},
		{[]string{"--hostname", "-bad-"}, "hostname"},
		{[]string{"--cpu-weight", "20000"}, "cpu_weight"},
		{[]string{"--memory", "64m", "--memory-low", "1g"}, "memory_low"},
		{[]string{"--exec-timeout", "soon"}, "exec_timeout"},
	} {
		_, stderr, code := boxctlRun(append([]string{"create"}, tc.args...)...)
		if code == 0 || !strings.Contains(stderr, "invalid_argument") || !strings.Contains(stderr, tc.field) {
			t.Errorf("create %v: exit %d, stderr %q; want invalid_argument naming %s", tc.args, code, stderr, tc.field)
		}
	}
	if got := countSandboxes(t); got != n {
		t.Errorf("%d sandboxes after the refused creates, want %d", got, n)
	}
}

// procMounts is the sandbox's /proc/mounts (with an output cap of its
// own: the sandbox's default may be small).
func procMounts(t *testing.T, id string) string {
	t.Helper()
	resp, err := env.api.Exec(ctx(t), connect.NewRequest(&boxdv1.ExecRequest{SandboxId: id, Args: []string{"cat", "/proc/mounts"}, OutputLimit: 1 << 20}))
	if err != nil {
		t.Fatal(err)
	}
	return string(resp.Msg.Stdout)
}
