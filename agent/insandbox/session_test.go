//go:build linux

package insandbox

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/errdefs"

	"github.com/boxd-dev/boxd/agent/wire"
)

// sessionShells are the shells sessions are tested with: the host's sh
// (dash on Debian), bash, and busybox's ash as the sandbox image has it.
func sessionShells(t *testing.T, tg *target) map[string]string {
	shells := map[string]string{"sh": "sh"}
	if p, err := exec.LookPath("bash"); err == nil {
		shells["bash"] = p
	}
	if bb, err := exec.LookPath("busybox"); err == nil {
		// busybox picks the applet by argv[0].
		link := filepath.Join(tg.workdir, "bb", "sh")
		os.MkdirAll(filepath.Dir(link), 0o755)
		if err := os.Symlink(bb, link); err != nil && !os.IsExist(err) {
			t.Fatal(err)
		}
		shells["busybox"] = link
	}
	return shells
}

func sessionRun(t *testing.T, tg *target, name, command string, timeout time.Duration) (string, string, wire.SessionResult) {
	t.Helper()
	var out, errb bytes.Buffer
	res, err := tg.client.SessionExec(testCtx(t), wire.SessionCommand{Name: name, Command: command, Timeout: timeout}, &out, &errb)
	if err != nil {
		t.Fatalf("session %s: %q: %v", name, command, err)
	}
	return out.String(), errb.String(), res
}

func TestSessionStatePersists(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		for label, shell := range sessionShells(t, tg) {
			t.Run(label, func(t *testing.T) {
				ctx := testCtx(t)
				name := "s-" + label
				info, err := tg.client.CreateSession(ctx, wire.SessionSpec{Name: name, Shell: shell, Env: []string{"GREETING=hi"}})
				if err != nil {
					t.Fatal(err)
				}
				defer tg.client.RemoveSession(ctx, name)
				if info.PID <= 0 || info.Name != name {
					t.Fatalf("info %+v", info)
				}
				steps := []struct {
					cmd, out, err string
					code          int
				}{
					{"cd /tmp && export A=1 && B=2 && f() { echo \"fn $1 $A$B\"; }", "", "", 0},
					{"pwd; f x; echo $GREETING", "/tmp\nfn x 12\nhi\n", "", 0},
					{"echo out; echo err >&2; false", "out\n", "err\n", 1},
					{"exit_code() { return $1; }; exit_code 42", "", "", 42},
					{"return 3", "", "", 3},
					{"if then", "", "syntax", 2},
					{"cat; echo after", "after\n", "", 0}, // stdin is /dev/null
					{"printf 'no newline'", "no newline", "", 0},
					{"cat <<EOF\nheredoc $A\nEOF", "heredoc 1\n", "", 0},
					{"echo 'it'\\''s'", "it's\n", "", 0},
					{"sh -c 'exit 9'", "", "", 9},
					{"echo $A; pwd", "1\n/tmp\n", "", 0},
				}
				for _, st := range steps {
					if st.cmd == "return 3" && label == "bash" {
						continue // bash refuses a top-level return, as at its prompt
					}
					out, errs, res := sessionRun(t, tg, name, st.cmd, 0)
					if out != st.out || !strings.Contains(strings.ToLower(errs), st.err) || res.ExitCode != st.code || res.Restarted || res.SessionEnded {
						t.Errorf("%q: stdout %q stderr %q result %+v; want %q, %q, %d", st.cmd, out, errs, res, st.out, st.err, st.code)
					}
					if st.err == "" && errs != "" {
						t.Errorf("%q: unexpected stderr %q", st.cmd, errs)
					}
				}
				// Big output keeps its bytes and stays apart from the next
				// command's.
				out, _, res := sessionRun(t, tg, name, "i=0; while [ $i -lt 2000 ]; do echo line$i; i=$((i+1)); done", 0)
				if res.ExitCode != 0 || strings.Count(out, "\n") != 2000 || !strings.HasSuffix(out, "line1999\n") {
					t.Fatalf("big output: %d lines, %+v", strings.Count(out, "\n"), res)
				}
				out, _, _ = sessionRun(t, tg, name, "echo next", 0)
				if out != "next\n" {
					t.Fatalf("after big output: %q", out)
				}
			})
		}
	})
}

func TestSessionTimeout(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		for label, shell := range sessionShells(t, tg) {
			t.Run(label, func(t *testing.T) {
				ctx := testCtx(t)
				name := "t-" + label
				if _, err := tg.client.CreateSession(ctx, wire.SessionSpec{Name: name, Shell: shell}); err != nil {
					t.Fatal(err)
				}
				defer tg.client.RemoveSession(ctx, name)
				out, _, _ := sessionRun(t, tg, name, "cd /tmp; X=kept; sleep 300 & echo $!", 0)
				bg, _ := strconv.Atoi(strings.TrimSpace(out))

				// A command with children: they die, the shell and its
				// earlier background job live on.
				start := time.Now()
				out, _, res := sessionRun(t, tg, name, "echo started; sleep 100 | cat; echo never", 300*time.Millisecond)
				if !res.TimedOut || res.ExitCode != wire.ExitTimeout || res.Restarted || out != "started\n" {
					t.Fatalf("timeout: %q %+v", out, res)
				}
				if time.Since(start) > 3*time.Second {
					t.Fatalf("timeout took %v", time.Since(start))
				}
				if processGone(bg) {
					t.Fatal("the timeout killed a background job of an earlier command")
				}
				out, _, res = sessionRun(t, tg, name, "echo $X; pwd", 0)
				if out != "kept\n/tmp\n" || res.ExitCode != 0 {
					t.Fatalf("state after timeout: %q %+v", out, res)
				}

				// A builtin loop: only replacing the shell stops it.
				_, _, res = sessionRun(t, tg, name, "while :; do :; done", 200*time.Millisecond)
				if !res.TimedOut || !res.Restarted || res.SessionEnded {
					t.Fatalf("builtin loop: %+v", res)
				}
				waitGone(t, bg)
				out, _, res = sessionRun(t, tg, name, "echo x${X}x; pwd", 0)
				if out != "xx\n"+tg.workdir+"\n" || res.ExitCode != 0 {
					t.Fatalf("after restart: %q %+v", out, res)
				}
				list, err := tg.client.ListSessions(ctx)
				if err != nil || len(list) != 1 || list[0].Restarts != 1 || list[0].Commands != 5 {
					t.Fatalf("list %+v %v", list, err)
				}
			})
		}
	})
}

func TestSessionLifecycle(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		ctx := testCtx(t)
		c := tg.client
		if _, err := c.CreateSession(ctx, wire.SessionSpec{Name: "a"}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.CreateSession(ctx, wire.SessionSpec{Name: "a"}); !errdefs.IsAlreadyExists(err) {
			t.Fatalf("duplicate: %v", err)
		}
		for _, bad := range []wire.SessionSpec{{Name: ""}, {Name: "../x"}, {Name: "b", Shell: "no-such-shell-boxd"}, {Name: "b", Shell: "true"}, {Name: "b", User: "no-such-user-boxd"}} {
			if _, err := c.CreateSession(ctx, bad); err == nil {
				t.Errorf("created %+v", bad)
			}
		}
		if _, err := c.CreateSession(ctx, wire.SessionSpec{Name: "b", User: "nobody", Dir: "/"}); err != nil {
			t.Fatal(err)
		}
		out, _, _ := sessionRun(t, tg, "b", "id -u; echo $HOME", 0)
		if out != "65534\n/nonexistent\n" {
			t.Fatalf("session user: %q", out)
		}
		// Sessions run side by side; commands in one session queue.
		var wg sync.WaitGroup
		start := time.Now()
		for _, name := range []string{"a", "b", "a"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, _, res := sessionRun(t, tg, name, "sleep 0.3", 0); res.ExitCode != 0 {
					t.Errorf("%s: %+v", name, res)
				}
			}()
		}
		wg.Wait()
		if d := time.Since(start); d < 600*time.Millisecond || d > 3*time.Second {
			t.Errorf("three commands over two sessions took %v", d)
		}
		list, err := c.ListSessions(ctx)
		if err != nil || len(list) != 2 || list[0].Name != "a" || list[0].User != "root" || list[1].User != "nobody" {
			t.Fatalf("list: %+v %v", list, err)
		}
		// exit ends the session.
		_, _, res := sessionRun(t, tg, "a", "exit 4", 0)
		if res.ExitCode != 4 || !res.SessionEnded {
			t.Fatalf("exit: %+v", res)
		}
		if _, err := c.SessionExec(ctx, wire.SessionCommand{Name: "a", Command: "true"}, nil, nil); !errdefs.IsNotFound(err) {
			t.Fatalf("exec in ended session: %v", err)
		}
		// A shell killed while idle ends its session; the name is free.
		info, err := c.CreateSession(ctx, wire.SessionSpec{Name: "a"})
		if err != nil {
			t.Fatal(err)
		}
		syscall.Kill(info.PID, syscall.SIGKILL)
		waitGone(t, info.PID)
		time.Sleep(50 * time.Millisecond)
		if list, _ := c.ListSessions(ctx); len(list) != 1 || list[0].Name != "b" {
			t.Fatalf("list after the shell was killed: %+v", list)
		}
		if _, err := c.CreateSession(ctx, wire.SessionSpec{Name: "a"}); err != nil {
			t.Fatalf("create after the shell was killed: %v", err)
		}
		// rm kills the shell and what it started, also mid-command.
		out, _, _ = sessionRun(t, tg, "b", "sleep 300 & echo $!", 0)
		bg, _ := strconv.Atoi(strings.TrimSpace(out))
		running := make(chan wire.SessionResult, 1)
		go func() {
			res, _ := c.SessionExec(ctx, wire.SessionCommand{Name: "b", Command: "sleep 100"}, nil, nil)
			running <- res
		}()
		time.Sleep(200 * time.Millisecond)
		if err := c.RemoveSession(ctx, "b"); err != nil {
			t.Fatal(err)
		}
		if res := <-running; !res.SessionEnded {
			t.Fatalf("command in removed session: %+v", res)
		}
		waitGone(t, bg)
		if err := c.RemoveSession(ctx, "b"); !errdefs.IsNotFound(err) {
			t.Fatalf("second rm: %v", err)
		}
		// A host that leaves mid-command stops the command, not the shell.
		if _, err := c.CreateSession(ctx, wire.SessionSpec{Name: "c"}); err != nil {
			t.Fatal(err)
		}
		sessionRun(t, tg, "c", "cd /tmp", 0)
		cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		c.SessionExec(cctx, wire.SessionCommand{Name: "c", Command: "sleep 100"}, nil, nil)
		cancel()
		out, _, _ = sessionRun(t, tg, "c", "pwd", 0)
		if out != "/tmp\n" {
			t.Fatalf("after a cancelled command: %q", out)
		}
	})
}

func TestSessionOutputLimit(t *testing.T) {
	tg := startServer(t)
	ctx := testCtx(t)
	if _, err := tg.client.CreateSession(ctx, wire.SessionSpec{Name: "l"}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	res, err := tg.client.SessionExec(ctx, wire.SessionCommand{Name: "l", Command: "yes | head -c 100000; echo e >&2", OutputLimit: 1000}, &out, nil)
	if err != nil || out.Len() != 1000 || !res.Truncated || res.ExitCode != 0 {
		t.Fatalf("%d bytes, %+v, %v", out.Len(), res, err)
	}
}
