//go:build linux

package e2e

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/boxd-dev/boxd/internal/rpcclient"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// replay returns the kept events since the given time that match filters.
func replay(t *testing.T, since time.Time, filters ...string) []*boxdv1.Event {
	t.Helper()
	stream, err := rpcclient.NewEvents(env.socket).Events(ctx(t), connect.NewRequest(&boxdv1.EventsRequest{
		Since: since.UTC().Format(time.RFC3339Nano), Filters: filters,
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	var out []*boxdv1.Event
	for stream.Receive() {
		if ev := stream.Msg().Event; ev != nil {
			out = append(out, ev)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// waitEvents waits until the replay holds an event of each wanted type
// (events from containerd arrive asynchronously) and returns it.
func waitEvents(t *testing.T, since time.Time, sandbox string, want ...string) []*boxdv1.Event {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		evs := replay(t, since, "sandbox="+sandbox)
		have := map[string]bool{}
		for _, ev := range evs {
			have[ev.Type] = true
		}
		var missing []string
		for _, w := range want {
			if !have[w] {
				missing = append(missing, w)
			}
		}
		if len(missing) == 0 {
			return evs
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s: no %v events; got %v", sandbox, missing, evs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func find(evs []*boxdv1.Event, typ string) *boxdv1.Event {
	for _, ev := range evs {
		if ev.Type == typ {
			return ev
		}
	}
	return nil
}

// TestEventsFromRealActions: every event type comes from a real action; a
// follower sees new events live; a consumer reconnecting with since gets
// the same events back, across a boxd SIGKILL and restart too; bad filters
// are invalid_argument naming them.
func TestEventsFromRealActions(t *testing.T) {
	start := time.Now().Add(-time.Millisecond)
	id := newSandbox(t, "--memory", "32m", "--idle-timeout", "1h")

	// A follower started before the pause sees it live.
	fctx, cancel := context.WithCancel(ctx(t))
	defer cancel()
	follow, err := rpcclient.NewEvents(env.socket).Events(fctx, connect.NewRequest(&boxdv1.EventsRequest{
		Filters: []string{"sandbox=" + id, "type=paused", "type=resumed"}, Follow: true,
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer follow.Close()

	if _, _, code := boxctlRun("exec", id, "--", "sh", "-c", "exit 3"); code != 3 {
		t.Fatalf("exit 3: got %d", code)
	}
	// The kernel OOM-kills dd's 64 MiB buffer in a 32 MiB sandbox.
	if _, _, code := boxctlRun("exec", id, "--", "dd", "if=/dev/zero", "of=/dev/null", "bs=64M", "count=1"); code == 0 {
		t.Fatal("dd of 64 MiB in a 32 MiB sandbox succeeded")
	}
	if _, err := boxctl(nil, "pause", id); err != nil {
		t.Fatal(err)
	}
	if _, err := boxctl(nil, "unpause", id); err != nil {
		t.Fatal(err)
	}
	got := make(chan *boxdv1.Event, 2)
	go func() {
		for follow.Receive() {
			if ev := follow.Msg().Event; ev != nil {
				got <- ev
			}
		}
		close(got)
	}()
	for _, want := range []string{"paused", "resumed"} {
		select {
		case ev := <-got:
			if ev == nil || ev.Type != want || ev.Sandbox != id {
				t.Fatalf("follower: got %v, want %s of %s (%v)", ev, want, id, follow.Err())
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("follower: no %s event within 10s", want)
		}
	}

	// A dead init is replaced.
	pid := inspect(t, id).InitPid
	if err := syscall.Kill(int(pid), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	evs := waitEvents(t, start, id, "created", "started", "exec_started", "exec_exited", "oom", "paused", "resumed", "died", "restarted")
	var exit3 bool
	for _, ev := range evs {
		exit3 = exit3 || (ev.Type == "exec_exited" && ev.Attrs["exit_code"] == "3")
	}
	if !exit3 {
		t.Errorf("no exec_exited with exit_code 3: %v", evs)
	}
	if ev := find(evs, "paused"); ev.Attrs["reason"] != "user" {
		t.Errorf("paused: %v", ev)
	}
	if ev := find(evs, "died"); ev.Attrs["exit_status"] != "137" {
		t.Errorf("died: %v", ev)
	}
	if ev := find(evs, "restarted"); !strings.Contains(ev.Attrs["reason"], "137") {
		t.Errorf("restarted: %v", ev)
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].Seq <= evs[i-1].Seq {
			t.Errorf("events out of order: %v then %v", evs[i-1], evs[i])
		}
	}

	// TTL expiry.
	out, err := boxctl(nil, "create", "--ttl", "2s")
	if err != nil {
		t.Fatal(err)
	}
	doomed := strings.TrimSpace(out)
	waitEvents(t, start, doomed, "created", "expired", "deleted")

	// Reconnect across a boxd SIGKILL: everything is replayed, in order,
	// and the sandbox keeps its idle policy.
	before := replay(t, start)
	killDaemon()
	if err := startDaemon(); err != nil {
		t.Fatal(err)
	}
	after := replay(t, start)
	if len(after) < len(before) {
		t.Fatalf("after a restart %d events replayed, before %d", len(after), len(before))
	}
	for i := range before {
		if after[i].Seq != before[i].Seq || after[i].Type != before[i].Type || after[i].Time != before[i].Time {
			t.Fatalf("replay %d differs after restart: %v vs %v", i, before[i], after[i])
		}
	}
	if sb := inspect(t, id); sb.IdleTimeout != "1h0m0s" || sb.OnIdle != "pause" {
		t.Errorf("idle policy after restart: %q %q", sb.IdleTimeout, sb.OnIdle)
	}

	if _, err := boxctl(nil, "rm", id); err != nil {
		t.Fatal(err)
	}
	waitEvents(t, start, id, "deleted")

	// boxctl events prints the replay.
	out, err = boxctl(nil, "events", "--since", "10m", "--no-follow", "--filter", "sandbox="+id, "--filter", "type=exec_exited")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, id+" exec_exited") || !strings.Contains(out, `exit_code="3"`) || strings.Contains(out, "paused") {
		t.Errorf("boxctl events:\n%s", out)
	}

	// Bad input names what is wrong.
	for _, c := range []struct {
		req  *boxdv1.EventsRequest
		want string
	}{
		{&boxdv1.EventsRequest{Filters: []string{"color=red"}}, `unknown filter key "color"`},
		{&boxdv1.EventsRequest{Filters: []string{"type=exploded"}}, `unknown event type "exploded"`},
		{&boxdv1.EventsRequest{Filters: []string{"sandbox"}}, "KEY=VALUE"},
		{&boxdv1.EventsRequest{Since: "yesterday"}, "since"},
	} {
		stream, err := rpcclient.NewEvents(env.socket).Events(ctx(t), connect.NewRequest(c.req))
		if err == nil {
			for stream.Receive() {
			}
			err = stream.Err()
		}
		wantCode(t, "events "+c.want, err, connect.CodeInvalidArgument, c.want)
	}
	_, stderr, code := boxctlRun("events", "--filter", "color=red")
	if code == 0 || !strings.Contains(stderr, "invalid_argument") || !strings.Contains(stderr, "color") {
		t.Errorf("boxctl events --filter color=red: exit %d, %q", code, stderr)
	}
}
