//go:build linux

package e2e

import (
	"strings"
	"testing"
	"time"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

func eventTime(t *testing.T, ev *boxdv1.Event) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339Nano, ev.Time)
	if err != nil {
		t.Fatalf("event time %q: %v", ev.Time, err)
	}
	return at
}

// waitState waits until a sandbox reaches state.
func waitState(t *testing.T, id, state string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if got := inspect(t, id).State; got == state {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s not %s within %v: %+v", id, state, timeout, inspect(t, id))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestIdleTimeout: the idle timeout pauses (or deletes) a sandbox nobody
// uses, reported as events, and never fires while a command runs, in the
// foreground or in the background.
func TestIdleTimeout(t *testing.T) {
	start := time.Now().Add(-time.Millisecond)
	id := newSandbox(t, "--idle-timeout", "2s")
	sb := inspect(t, id)
	if sb.IdleTimeout != "2s" || sb.OnIdle != "pause" || sb.LastActivityAt == "" {
		t.Fatalf("inspect: idle_timeout %q on_idle %q last_activity_at %q", sb.IdleTimeout, sb.OnIdle, sb.LastActivityAt)
	}
	// A command twice as long as the timeout: the sandbox stays in use (a
	// pause mid-command would freeze it and this exec would not return).
	execStart := time.Now()
	out, stderr, code := boxctlRun("exec", id, "--", "sh", "-c", "sleep 4; echo done")
	if code != 0 || out != "done\n" {
		t.Fatalf("4 s command: exit %d %q %q", code, out, stderr)
	}
	waitState(t, id, "paused", 15*time.Second)
	// The command ran at least 4 s from execStart, and the timeout counts
	// 2 s from its end.
	if ev := find(replay(t, start, "sandbox="+id), "idle"); ev == nil || eventTime(t, ev).Before(execStart.Add(6*time.Second)) {
		t.Fatalf("idle fired while a command ran or too early (the command started at %s): %v", execStart.UTC().Format(time.RFC3339Nano), ev)
	}
	if sb := inspect(t, id); sb.PauseReason != "idle" {
		t.Errorf("pause reason %q", sb.PauseReason)
	}
	evs := waitEvents(t, start, id, "idle", "paused")
	if ev := find(evs, "idle"); ev.Attrs["action"] != "pause" {
		t.Errorf("idle event: %v", ev)
	}
	if ev := find(evs, "paused"); ev.Attrs["reason"] != "idle" {
		t.Errorf("paused event: %v", ev)
	}
	// exec --resume brings it back; the idle clock starts again.
	if out, _, code := boxctlRun("exec", "--resume", id, "--", "echo", "back"); code != 0 || out != "back\n" {
		t.Fatalf("exec --resume after idle pause: %d %q", code, out)
	}

	// on-idle delete; a background command keeps the sandbox in use until
	// it ends.
	out, err := boxctl(nil, "create", "--idle-timeout", "2s", "--on-idle", "delete")
	if err != nil {
		t.Fatal(err)
	}
	gone := strings.TrimSpace(out)
	t.Cleanup(func() { boxctl(nil, "rm", "-f", gone) })
	bgStart := time.Now()
	if _, err := boxctl(nil, "exec", "-d", gone, "--", "sleep", "5"); err != nil {
		t.Fatal(err)
	}
	if !expired(gone, 30*time.Second) {
		t.Fatalf("idle sandbox %s with on-idle delete still exists", gone)
	}
	assertGone(t, gone)
	ev := find(waitEvents(t, start, gone, "idle", "deleted"), "idle")
	if ev.Attrs["action"] != "delete" {
		t.Errorf("idle event: %v", ev)
	}
	// sleep 5 ran from after bgStart: the idle delete came after it ended.
	if at := eventTime(t, ev); at.Before(bgStart.Add(5 * time.Second)) {
		t.Errorf("idle delete at %s while the background command (started after %s) still ran", at.Format(time.RFC3339Nano), bgStart.UTC().Format(time.RFC3339Nano))
	}

	// Bad input.
	for _, c := range [][]string{{"--on-idle", "stop"}, {"--idle-timeout", "10ms"}, {"--idle-timeout", "soon"}} {
		_, stderr, code := boxctlRun(append([]string{"create"}, c...)...)
		field := strings.ReplaceAll(strings.TrimPrefix(c[0], "--"), "-", "_")
		if code == 0 || !strings.Contains(stderr, "invalid_argument") || !strings.Contains(stderr, field) {
			t.Errorf("create %v: exit %d, %q", c, code, stderr)
		}
	}
}
