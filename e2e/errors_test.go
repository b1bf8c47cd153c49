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
// filled by detached sleeps, starting one more, and an exec through the
// fast path, are resource_exhausted naming the pids limit, not internal
// "resource temporarily unavailable".
func TestExecAtPidsLimitIsResourceExhausted(t *testing.T) {
	id := newSandbox(t, "--pids", "16")
	const want = "pids limit (limits.pids)"
	var stderr string
	var code int
	for i := 0; ; i++ {
		if _, stderr, code = boxctlRun("exec", "-d", id, "--", "sleep", "600"); code != 0 {
			break
		}
		if i == 16 {
			t.Fatalf("16 detached sleeps started under --pids 16")
		}
	}
	if !strings.HasPrefix(stderr, "boxctl: resource_exhausted: ") || !strings.Contains(stderr, want) {
		t.Errorf("exec -d at the pids limit: exit %d, stderr %q, want resource_exhausted naming the pids limit", code, stderr)
	}
	_, stderr, code = cliRun(t, env.boxctl, []string{"BOXCTL_NO_FULL=1"}, "", "--socket", env.socket, "exec", id, "--", "true")
	if code != 125 || !strings.HasPrefix(stderr, "boxctl: resource_exhausted: ") || !strings.Contains(stderr, want) {
		t.Errorf("exec at the pids limit: exit %d, stderr %q, want 125 and resource_exhausted naming the pids limit", code, stderr)
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
