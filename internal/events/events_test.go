package events

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestReplayAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(-time.Second)
	l.Emit(Created, "a", 0, nil)
	l.Emit(ExecExited, "a", 0, map[string]string{"exit_code": "3"})
	l.Emit(Created, "b", 0, nil)
	l.Close()
	// A torn last line, as a SIGKILL mid-write leaves it.
	f, _ := os.OpenFile(filepath.Join(dir, "events.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"seq":99,"ti`)
	f.Close()

	l, err = Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got, _ := l.Subscribe(start, Filter{Sandboxes: map[string]bool{"a": true}}, false)
	if len(got) != 2 || got[0].Type != Created || got[1].Attrs["exit_code"] != "3" {
		t.Fatalf("replay = %+v", got)
	}
	l.Emit(Deleted, "a", 0, nil)
	all, _ := l.Subscribe(start, Filter{}, false)
	if last := all[len(all)-1]; last.Seq != 4 || last.Type != Deleted {
		t.Fatalf("seq does not continue after reopen: %+v", last)
	}
}

func TestFollowAndFilter(t *testing.T) {
	l, err := Open(Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.Emit(Created, "a", 0, nil)
	replay, sub := l.Subscribe(time.Time{}, Filter{Types: map[string]bool{Paused: true}}, true)
	defer sub.Close()
	if len(replay) != 0 {
		t.Fatalf("zero since replayed %v", replay)
	}
	l.Emit(Created, "b", 0, nil)
	l.Emit(Paused, "b", 0, nil)
	select {
	case ev := <-sub.C():
		if ev.Type != Paused || ev.Sandbox != "b" {
			t.Fatalf("got %+v", ev)
		}
	case <-time.After(time.Second):
		t.Fatal("no event")
	}
}

func TestSlowConsumerEnded(t *testing.T) {
	l, err := Open(Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, sub := l.Subscribe(time.Time{}, Filter{}, true)
	for i := 0; i <= subBuffer; i++ {
		l.Emit(Created, "a", 0, nil)
	}
	select {
	case <-sub.Done():
		if sub.Err() != ErrSlow {
			t.Fatalf("err = %v", sub.Err())
		}
	default:
		t.Fatal("a consumer that fell behind was not ended")
	}
}

func TestRotateAndBounds(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(Config{Dir: dir, MaxFileBytes: 2000, MaxEvents: 30})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		l.Emit(ExecStarted, "sandbox", 0, map[string]string{"args": strings.Repeat("x", 20)})
	}
	if n := len(l.ring); n > 30 {
		t.Errorf("ring holds %d events, cap 30", n)
	}
	l.Close()
	for _, name := range []string{"events.jsonl", "events.jsonl.1"} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil || st.Size() > 2000 {
			t.Errorf("%s: %v, size %d, want <= 2000", name, err, st.Size())
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "events.jsonl.2")); err == nil {
		t.Error("more than one rotated file kept")
	}
	// The newest events survive a reopen through the two files.
	l, err = Open(Config{Dir: dir, MaxFileBytes: 2000, MaxEvents: 30})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if last := l.ring[len(l.ring)-1]; last.Seq != 100 {
		t.Errorf("last after reopen: %+v", last)
	}
}

func TestOldEventsDropped(t *testing.T) {
	dir := t.TempDir()
	old := `{"seq":1,"time":"` + time.Now().Add(-3*time.Hour).UTC().Format(time.RFC3339Nano) + `","type":"created","sandbox":"x"}` + "\n"
	if err := os.WriteFile(filepath.Join(dir, "events.jsonl"), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if len(l.ring) != 0 {
		t.Fatalf("a 3 h old event was kept: %+v", l.ring)
	}
	l.Emit(Created, "y", 0, nil)
	if l.ring[0].Seq != 2 {
		t.Fatalf("seq restarted: %+v", l.ring[0])
	}
}

// Events older than Keep are never replayed, and the ring sheds them in
// batches: a few stale events among many fresh ones stay until a batch is
// due (moving the whole ring per event was the cost), many go at once.
func TestStaleEventsTrimmedInBatches(t *testing.T) {
	l, err := Open(Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	stale := time.Now().Add(-2 * time.Hour)
	for range 1000 {
		l.Emit(ExecStarted, "new", 0, nil)
	}
	for i := range 10 {
		l.ring[i].Time, l.ring[i].Sandbox = stale, "old"
	}
	l.Emit(ExecStarted, "new", 0, nil)
	replay, _ := l.Subscribe(time.Now().Add(-3*time.Hour), Filter{}, false)
	if len(replay) != 991 {
		t.Fatalf("replay of the last 3 h gave %d events, want the 991 fresh ones", len(replay))
	}
	for _, ev := range replay {
		if ev.Sandbox == "old" {
			t.Fatalf("a stale event was replayed: %+v", ev)
		}
	}
	if l.ring[0].Sandbox != "old" {
		t.Errorf("10 stale events among 1000 were trimmed one by one")
	}
	for i := range 200 {
		l.ring[i].Time = stale
	}
	l.Emit(ExecStarted, "new", 0, nil)
	if l.ring[0].Time.Before(time.Now().Add(-time.Hour)) {
		t.Errorf("a sixth of the ring stale, and it was not trimmed: %d events, first %+v", len(l.ring), l.ring[0])
	}
}

// The events file is written with a hand-made encoder (jsonline); its
// lines must be what json.Marshal wrote before, for any event.
func TestEventJSONMatchesEncodingJSON(t *testing.T) {
	evs := []Event{
		{},
		{Seq: 1, Time: time.Now().UTC(), Type: ExecStarted, Sandbox: "0123456789ab", Owner: 4294967295, Attrs: map[string]string{"args": "sh -c 'echo \"<hi>\" & \x00\xff'"}},
		{Seq: 1 << 62, Time: time.Now(), Type: Died, Sandbox: "n\u2028", Attrs: map[string]string{}},
		{Seq: 7, Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("y", 3600)), Type: ExecExited, Attrs: map[string]string{"exit_code": "1", "signal": "SIGKILL", "a": ""}},
		{Seq: 8, Time: time.Date(12000, 1, 1, 0, 0, 0, 0, time.UTC), Type: OOM}, // a year json.Marshal refuses
	}
	for _, ev := range evs {
		want, werr := json.Marshal(ev)
		got := ev.appendJSON([]byte("prefix"))
		if werr != nil {
			if string(got[len("prefix"):]) != "" {
				t.Errorf("%+v: json.Marshal fails (%v) but appendJSON wrote %s", ev, werr, got)
			}
			continue
		}
		if string(got) != "prefix"+string(want) {
			t.Errorf("appendJSON(%+v) = %s, json.Marshal = %s", ev, got, want)
		}
	}
}

// TestOwnerFilter: a filter with an owner sees that uid's events alone, in
// the replay and live; the owner survives a reopen, and an event recorded
// without one is root's.
func TestOwnerFilter(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(-time.Second)
	l.Emit(ExecStarted, "a", 1001, nil)
	l.Emit(ExecStarted, "b", 1002, nil)
	l.Close()
	old := `{"seq":3,"time":"` + time.Now().UTC().Format(time.RFC3339Nano) + `","type":"created","sandbox":"c"}` + "\n"
	f, _ := os.OpenFile(filepath.Join(dir, "events.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(old)
	f.Close()
	if l, err = Open(Config{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	uid, root := uint32(1002), uint32(0)
	replay, sub := l.Subscribe(start, Filter{Owner: &uid}, true)
	defer sub.Close()
	if len(replay) != 1 || replay[0].Sandbox != "b" || replay[0].Owner != 1002 {
		t.Fatalf("uid 1002's replay = %+v", replay)
	}
	if r, _ := l.Subscribe(start, Filter{Owner: &root}, false); len(r) != 1 || r[0].Sandbox != "c" {
		t.Fatalf("an event without an owner must be root's: %+v", r)
	}
	if all, _ := l.Subscribe(start, Filter{}, false); len(all) != 3 {
		t.Fatalf("no owner filter: %+v", all)
	}
	l.Emit(Created, "a2", 1001, nil)
	l.Emit(Created, "b2", 1002, nil)
	select {
	case ev := <-sub.C():
		if ev.Sandbox != "b2" {
			t.Fatalf("uid 1002's follower got %+v", ev)
		}
	case <-time.After(time.Second):
		t.Fatal("no event")
	}
}

// TestFilesRootOnly: the directory is 0700 and its files 0600, also when
// an earlier start left them readable.
func TestFilesRootOnly(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "events")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"events.jsonl", "events.jsonl.1"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for name, want := range map[string]os.FileMode{"": 0o700, "events.jsonl": 0o600, "events.jsonl.1": 0o600} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil || st.Mode().Perm() != want {
			t.Errorf("%q: mode %v (%v), want %v", name, st.Mode().Perm(), err, want)
		}
	}
}
