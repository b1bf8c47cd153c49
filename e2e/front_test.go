//go:build linux

package e2e

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cliRun runs a boxctl binary as `boxctl` (argv[0] as a user types it, which
// the full CLI's help shows) with extra environment, and returns stdout,
// stderr and the exit code (-1 when a signal ended it).
func cliRun(t *testing.T, bin string, env []string, stdin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Args[0] = "boxctl"
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return stdout.String(), stderr.String(), ee.ExitCode()
	case err != nil:
		t.Fatalf("run %s: %v", bin, err)
	}
	return stdout.String(), stderr.String(), 0
}

func fullCLI() string { return filepath.Join(filepath.Dir(env.boxctl), "boxctl-full") }

// TestFrontMatchesFullCLI runs each case through boxctl's fast path (the
// front with BOXCTL_NO_FULL=1, which fails rather than hand the command to
// the full CLI) and through boxctl-full, and wants the same bytes on stdout
// and stderr and the same exit code. Cases the front hands over run through
// the front as installed, and must match too.
func TestFrontMatchesFullCLI(t *testing.T) {
	id := newSandbox(t, "--env", "BASE=base")
	sock := "--socket=" + env.socket
	fast := []string{"BOXCTL_NO_FULL=1"}
	cases := []struct {
		name  string
		args  []string
		env   []string // for both
		stdin string
		fast  bool // the front serves it itself
	}{
		{"true", []string{sock, "exec", id, "--", "true"}, nil, "", true},
		{"streams and exit code", []string{sock, "exec", id, "--", "sh", "-c", "echo out; echo err >&2; echo more; exit 3"}, nil, "", true},
		{"no --", []string{sock, "exec", id, "echo", "a b", "$HOME"}, nil, "", true},
		{"-- first", []string{sock, "exec", "--", id, "echo", "x"}, nil, "", true},
		{"-- as the command", []string{sock, "exec", id, "--", "--", "true"}, nil, "", true},
		{"socket from the environment", []string{"exec", id, "--", "true"}, []string{"BOXD_SOCKET=" + env.socket}, "", true},
		{"socket flag twice", []string{"--socket", "/nonexistent", sock, "exec", id, "--", "true"}, nil, "", true},
		{"env, workdir, timeout", []string{sock, "exec", "-e", "X=1", "-e=BASE=over", "-w", "/tmp", "--timeout=1m", id, "--", "sh", "-c", "echo $X$BASE; pwd"}, nil, "", true},
		{"long flags", []string{sock, "exec", "--env", "Y=ü \"q\" \\", "--workdir=/", "-timeout", "10s", id, "--", "sh", "-c", "echo \"$Y\"; pwd"}, nil, "", true},
		{"missing command", []string{sock, "exec", id, "--", "no-such-command"}, nil, "", true},
		{"not executable", []string{sock, "exec", id, "--", "/etc/passwd"}, nil, "", true},
		{"killed by SIGKILL", []string{sock, "exec", id, "--", "sh", "-c", "kill -9 $$"}, nil, "", true},
		{"killed by SIGTERM", []string{sock, "exec", id, "--", "sh", "-c", "kill -TERM $$"}, nil, "", true},
		{"exit 255", []string{sock, "exec", id, "--", "sh", "-c", "exit 255"}, nil, "", true},
		{"timeout", []string{sock, "exec", "--timeout", "300ms", id, "--", "sh", "-c", "echo before; sleep 30"}, nil, "", true},
		{"bad timeout", []string{sock, "exec", "--timeout", "soon", id, "--", "true"}, nil, "", true},
		{"relative workdir", []string{sock, "exec", "-w", "rel", id, "--", "true"}, nil, "", true},
		{"missing workdir", []string{sock, "exec", "-w", "/no/such/dir", id, "--", "true"}, nil, "", true},
		{"bad env", []string{sock, "exec", "-e", "NOEQUALS", id, "--", "true"}, nil, "", true},
		{"unknown sandbox", []string{sock, "exec", "feedfacecafe", "--", "true"}, nil, "", true},
		{"empty sandbox id", []string{sock, "exec", "", "--", "true"}, nil, "", true},
		{"binary output", []string{sock, "exec", id, "--", "printf", "\\000\\377\\376\\n"}, nil, "", true},
		{"interleaved lines", []string{sock, "exec", id, "--", "sh", "-c", "i=0; while [ $i -lt 300 ]; do echo out $i; echo err $i >&2; i=$((i+1)); done"}, nil, "", true},
		{"4 MiB out", []string{sock, "exec", id, "--", "sh", "-c", "head -c 4194304 /dev/zero | tr '\\0' x"}, nil, "", true},
		{"3 MiB err", []string{sock, "exec", id, "--", "sh", "-c", "head -c 3145728 /dev/zero >&2"}, nil, "", true},
		{"truncated", []string{sock, "exec", id, "--", "sh", "-c", "head -c 20000000 /dev/zero"}, nil, "", true},
		{"stdin is not read", []string{sock, "exec", id, "--", "cat"}, nil, "ignored", true},

		// Handed to the full CLI.
		{"-i", []string{sock, "exec", "-i", id, "--", "cat"}, nil, "in", false},
		{"-u", []string{sock, "exec", "-u", "0", id, "--", "id", "-u"}, nil, "", false},
		{"two forms of a flag", []string{sock, "exec", "-e", "A=1", "--env", "B=2", id, "--", "true"}, nil, "", false},
		{"comma in env", []string{sock, "exec", "-e", "A=1,B=2", id, "--", "sh", "-c", "echo $A$B"}, nil, "", false},
		{"usage", []string{sock, "exec", id}, nil, "", false},
		{"exec help", []string{sock, "exec", "--help"}, nil, "", false},
		{"ls", []string{sock, "ls"}, nil, "", false},
		{"no daemon", []string{"--socket", filepath.Join(t.TempDir(), "none.sock"), "exec", id, "--", "true"}, nil, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			frontEnv := tc.env
			if tc.fast {
				frontEnv = append(append([]string{}, tc.env...), fast...)
			}
			fo, fe, fc := cliRun(t, env.boxctl, frontEnv, tc.stdin, tc.args...)
			wo, we, wc := cliRun(t, fullCLI(), tc.env, tc.stdin, tc.args...)
			if fo != wo || fe != we || fc != wc {
				t.Errorf("front: exit %d, stdout %d bytes %.80q, stderr %.200q\nfull:  exit %d, stdout %d bytes %.80q, stderr %.200q",
					fc, len(fo), fo, fe, wc, len(wo), wo, we)
			}
		})
	}
}

// TestFrontFastPath: BOXCTL_NO_FULL=1 makes the front refuse what it would
// hand over, so the cases above that pass with it were served by the fast
// path.
func TestFrontFastPath(t *testing.T) {
	id := newSandbox(t)
	_, stderr, code := cliRun(t, env.boxctl, []string{"BOXCTL_NO_FULL=1"}, "", "--socket", env.socket, "exec", "-i", id, "--", "true")
	if code != 125 || !strings.Contains(stderr, "BOXCTL_NO_FULL=1 and the fast path cannot serve this") {
		t.Fatalf("exec -i with BOXCTL_NO_FULL=1: exit %d, stderr %q", code, stderr)
	}
	out, stderr, code := cliRun(t, env.boxctl, []string{"BOXCTL_NO_FULL=1"}, "", "--socket", env.socket, "exec", id, "--", "echo", "fast")
	if code != 0 || out != "fast\n" || stderr != "" {
		t.Fatalf("exec with BOXCTL_NO_FULL=1: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
}

// TestFrontSignalsAndPipes: a closed pipe ends the front as it ends the full
// CLI (SIGPIPE), and a SIGINT or SIGTERM to the front kills the command in
// the sandbox.
func TestFrontSignalsAndPipes(t *testing.T) {
	id := newSandbox(t)
	for _, bin := range []string{env.boxctl, fullCLI()} {
		cmd := exec.Command(bin, "--socket", env.socket, "exec", id, "--", "yes")
		cmd.Env = append(os.Environ(), "BOXCTL_NO_FULL=1")
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout = w
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		w.Close()
		if _, err := r.Read(make([]byte, 10)); err != nil {
			t.Fatal(err)
		}
		r.Close()
		err = cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGPIPE {
			t.Errorf("%s with its stdout closed: %v, want death by SIGPIPE", filepath.Base(bin), err)
		}
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		marker := map[syscall.Signal]string{syscall.SIGINT: "sleep 301", syscall.SIGTERM: "sleep 302"}[sig]
		cmd := exec.Command(env.boxctl, "--socket", env.socket, "exec", id, "--", "sh", "-c", marker+"; true")
		cmd.Env = append(os.Environ(), "BOXCTL_NO_FULL=1")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		running := func() bool { return strings.Contains(sh(t, id, "ps"), marker) }
		deadline := time.Now().Add(10 * time.Second)
		for !running() {
			if time.Now().After(deadline) {
				t.Fatalf("%s never started", marker)
			}
			time.Sleep(50 * time.Millisecond)
		}
		_ = cmd.Process.Signal(sig)
		err := cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != sig {
			t.Errorf("front after %v: %v, want death by it", sig, err)
		}
		for running() {
			if time.Now().After(deadline) {
				t.Fatalf("%s still runs in the sandbox after %v to boxctl", marker, sig)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}
