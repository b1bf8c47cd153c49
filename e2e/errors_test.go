//go:build linux

package e2e

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// TestDaemonKilledMidCallIsUnavailable: boxd SIGKILLed while an exec runs.
// boxctl's fast path (rpc/lite) and boxctl-full both report unavailable, the
// code to retry on, not invalid_argument ("incomplete envelope") as if the
// request had been bad.
func TestDaemonKilledMidCallIsUnavailable(t *testing.T) {
	id := newSandbox(t)
	type run struct {
		name   string
		cmd    *exec.Cmd
		stderr bytes.Buffer
	}
	runs := []*run{{name: "front"}, {name: "full"}}
	for _, r := range runs {
		bin, extra := fullCLI(), []string(nil)
		if r.name == "front" {
			bin, extra = env.boxctl, []string{"BOXCTL_NO_FULL=1"}
		}
		r.cmd = exec.Command(bin, "--socket", env.socket, "exec", id, "--", "sh", "-c", "echo started; sleep 5")
		r.cmd.Env = append(os.Environ(), extra...)
		out := &lineWaiter{ch: make(chan struct{})}
		r.cmd.Stdout, r.cmd.Stderr = out, &r.stderr
		if err := r.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-out.ch:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: the command did not start", r.name)
		}
	}
	killDaemon()
	restartErr := startDaemon()
	for _, r := range runs {
		err := r.cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 125 ||
			!strings.Contains(r.stderr.String(), "boxctl: unavailable: connection to boxd lost mid-call") {
			t.Errorf("%s: %v, stderr %q; want exit 125 and unavailable: connection to boxd lost mid-call", r.name, err, r.stderr.String())
		}
	}
	if restartErr != nil {
		t.Fatal(restartErr)
	}
}

// lineWaiter closes ch at the first write: the command has started.
type lineWaiter struct {
	ch   chan struct{}
	seen bool
}

func (w *lineWaiter) Write(p []byte) (int, error) {
	if !w.seen {
		w.seen = true
		close(w.ch)
	}
	return len(p), nil
}

// TestErrorsSayTheirClassOnce: a missing id and an existing image name, through
// boxctl and the API: the message says "not found" / "already exists" once,
// the code says it again, and nothing else repeats it.
func TestErrorsSayTheirClassOnce(t *testing.T) {
	_, stderr, code := boxctlRun("inspect", "nope")
	if want := "boxctl: not_found: sandbox \"nope\" not found\n"; stderr != want || code == 0 {
		t.Errorf("inspect nope: exit %d, stderr %q, want %q", code, stderr, want)
	}
	_, err := env.api.GetSandbox(ctx(t), connect.NewRequest(&boxdv1.GetSandboxRequest{Id: "nope"}))
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeNotFound || ce.Message() != `sandbox "nope" not found` {
		t.Errorf("GetSandbox nope: %v", err)
	}
	_, stderr, _ = boxctlRun("image", "import", "--rootfs", env.busybox, "--name", testImage)
	if !strings.HasPrefix(stderr, "boxctl: already_exists: ") || strings.Count(stderr, "already exists") != 1 {
		t.Errorf("image import of an existing name: stderr %q, want already_exists saying it once", stderr)
	}
}

// TestZeroLimitsRefused: boxctl create --cpus 0 or --pids 0 is refused,
// naming the flag, and makes nothing; omitted, the daemon's default holds.
func TestZeroLimitsRefused(t *testing.T) {
	for _, flag := range []string{"--cpus", "--pids"} {
		_, stderr, code := boxctlRun("create", "--label", "errors=zero", flag, "0")
		if code == 0 || !strings.HasPrefix(stderr, "boxctl: invalid_argument: "+flag+" 0: ") {
			t.Errorf("create %s 0: exit %d, stderr %q", flag, code, stderr)
		}
	}
	if out, err := boxctl(nil, "ls", "--json", "--label", "errors=zero"); err != nil || strings.Contains(out, "errors") {
		t.Errorf("a refused create left a sandbox: %v %s", err, out)
	}
	newSandbox(t) // omitted: the defaults
}

// TestImportNotAnArchive: image import of a file that is no tar is
// invalid_argument naming the file and saying what it is not, not
// "unexpected EOF".
func TestImportNotAnArchive(t *testing.T) {
	_, stderr, code := boxctlRun("image", "import", "/etc/hostname", "--name", "errors/not-a-tar")
	want := "boxctl: invalid_argument: /etc/hostname: import image archive: data: not a tar or OCI archive"
	if code == 0 || !strings.HasPrefix(stderr, want) {
		t.Errorf("import /etc/hostname: exit %d, stderr %q, want %q...", code, stderr, want)
	}
	if out, _ := boxctl(nil, "image", "ls"); strings.Contains(out, "not-a-tar") {
		t.Errorf("a refused import left an image:\n%s", out)
	}
}

// TestExecAtPidsLimitIsResourceExhausted: with the sandbox's pids limit
// filled by sleeps, an exec is resource_exhausted naming the pids limit,
// not internal "resource temporarily unavailable"; freed, it runs again.
func TestExecAtPidsLimitIsResourceExhausted(t *testing.T) {
	id := newSandbox(t, "--pids", "16")
	fill := exec.Command(env.boxctl, "--socket", env.socket, "exec", "--timeout", "60s", id, "--",
		"sh", "-c", "i=0; while [ $i -lt 32 ]; do sleep 600 </dev/null >/dev/null 2>&1 & i=$((i+1)); done; sleep 600")
	if err := fill.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = fill.Process.Kill()
		_ = fill.Wait()
	}()
	var stderr string
	var code int
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if _, stderr, code = boxctlRun("exec", id, "--", "true"); code != 0 {
			break
		}
	}
	if code != 125 || !strings.HasPrefix(stderr, `boxctl: resource_exhausted: exec "true": `) || !strings.Contains(stderr, "pids limit (limits.pids)") {
		t.Fatalf("exec at the pids limit: exit %d, stderr %q, want 125 and resource_exhausted naming the pids limit", code, stderr)
	}
	_ = fill.Process.Kill() // boxd kills the command's tree when its caller goes
	_ = fill.Wait()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if _, stderr, code = boxctlRun("exec", id, "--", "true"); code == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("exec after the sleeps went: exit %d, stderr %q", code, stderr)
		}
	}
}

// TestWriteIntoProcSysIsPermissionDenied: a file write and a cp onto
// /proc/sys/kernel/hostname are permission_denied, not not_found of a file
// that is there; the host name is unchanged.
func TestWriteIntoProcSysIsPermissionDenied(t *testing.T) {
	id := newSandbox(t)
	before := sh(t, id, "cat /proc/sys/kernel/hostname")
	src := filepath.Join(t.TempDir(), "hostname")
	if err := os.WriteFile(src, []byte("evil\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := boxctl([]byte("evil\n"), "files", "write", id, "/proc/sys/kernel/hostname"); err == nil ||
		!strings.Contains(err.Error(), "boxctl: permission_denied: ") {
		t.Errorf("files write /proc/sys/kernel/hostname: %v, want permission_denied", err)
	}
	if _, stderr, code := boxctlRun("cp", src, id+":/proc/sys/kernel/hostname"); code == 0 ||
		!strings.HasPrefix(stderr, "boxctl: permission_denied: ") {
		t.Errorf("cp onto /proc/sys/kernel/hostname: exit %d, stderr %q, want permission_denied", code, stderr)
	}
	if after := sh(t, id, "cat /proc/sys/kernel/hostname"); after != before {
		t.Errorf("host name changed from %q to %q", before, after)
	}
}
