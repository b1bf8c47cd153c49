//go:build linux

package runtime

import (
	"bufio"
	"os"
	"strings"
	"testing"
	"time"
)

// TestUsageV2RecordedFiles parses a cgroup v2 directory recorded from a
// real kernel's formats (this host runs v1, so the v2 path is tested here).
func TestUsageV2RecordedFiles(t *testing.T) {
	u, err := usageV2("testdata/cgroupv2")
	if err != nil {
		t.Fatal(err)
	}
	want := Usage{
		CPUUsec: 2735419, MemoryBytes: 54841344, MemoryPeak: 91537408, MemoryLimit: 536870912,
		OOMKills: 2, Pids: 7, BlockReadBytes: 1187840 + 4096, BlockWriteBytes: 20971520 + 8192,
	}
	if *u != want {
		t.Errorf("got  %+v\nwant %+v", *u, want)
	}
}

// TestUsageV2OlderKernel: no memory.peak (before 5.19), memory.max "max",
// an empty io.stat: zeros, not errors.
func TestUsageV2OlderKernel(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"cpu.stat": "usage_usec 10\nuser_usec 5\nsystem_usec 5\n", "memory.current": "4096\n",
		"memory.max": "max\n", "memory.events": "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n",
		"pids.current": "1\n", "io.stat": "",
	} {
		if err := os.WriteFile(dir+"/"+name, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	u, err := usageV2(dir)
	if err != nil {
		t.Fatal(err)
	}
	if (*u != Usage{CPUUsec: 10, MemoryBytes: 4096, Pids: 1}) {
		t.Errorf("got %+v", *u)
	}
	os.WriteFile(dir+"/memory.current", []byte("lots\n"), 0o644)
	if _, err := usageV2(dir); err == nil || !strings.Contains(err.Error(), "memory.current") {
		t.Errorf("a malformed memory.current: %v", err)
	}
}

func TestParseNetDev(t *testing.T) {
	f, err := os.Open("testdata/net_dev")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rx, tx, err := parseNetDev(bufio.NewScanner(f))
	if err != nil || rx != 987654 || tx != 45678 {
		t.Errorf("rx %d tx %d err %v; want 987654 45678 (loopback left out)", rx, tx, err)
	}
	if _, _, err := parseNetDev(bufio.NewScanner(strings.NewReader("eth0: 1 2\n"))); err == nil {
		t.Error("a short line was accepted")
	}
}

func TestParseFrozenV2(t *testing.T) {
	b, err := os.ReadFile("testdata/cgroupv2/cgroup.events")
	if err != nil {
		t.Fatal(err)
	}
	if parseFrozenV2(string(b)) {
		t.Error("frozen 0 read as frozen")
	}
	if !parseFrozenV2("populated 1\nfrozen 1\n") {
		t.Error("frozen 1 not read as frozen")
	}
	if !parseKeyV2(string(b), "populated") || parseKeyV2("populated 0\nfrozen 0\n", "populated") {
		t.Error("populated misread")
	}
}

func TestResolveIdle(t *testing.T) {
	m := &Manager{cfg: Config{IdleTimeout: time.Hour, OnIdle: IdleDelete}}
	var r resolved
	if err := m.resolveIdle(CreateRequest{}, &r); err != nil || r.idle != (idlePolicy{time.Hour, IdleDelete}) {
		t.Errorf("defaults: %+v %v", r.idle, err)
	}
	if err := m.resolveIdle(CreateRequest{IdleTimeout: "0"}, &r); err != nil || idleLabel(r.idle) != "" {
		t.Errorf("0 must switch it off: %+v %v", r.idle, err)
	}
	if err := m.resolveIdle(CreateRequest{IdleTimeout: "90s", OnIdle: "pause"}, &r); err != nil || r.idle != (idlePolicy{90 * time.Second, IdlePause}) {
		t.Errorf("90s pause: %+v %v", r.idle, err)
	}
	for _, bad := range []CreateRequest{{IdleTimeout: "soon"}, {IdleTimeout: "-1m"}, {IdleTimeout: "10ms"}, {OnIdle: "stop"}} {
		err := m.resolveIdle(bad, &r)
		var fe *FieldError
		if err == nil || !asFieldErr(err, &fe) {
			t.Errorf("%+v: %v, want a field error", bad, err)
		}
	}
	p, ok := parseIdle(map[string]string{LabelIdle: idleLabel(idlePolicy{time.Minute, IdlePause})})
	if !ok || p.Timeout != time.Minute || p.Action != IdlePause {
		t.Errorf("label round trip: %+v %v", p, ok)
	}
}

func asFieldErr(err error, fe **FieldError) bool {
	e, ok := err.(*FieldError)
	*fe = e
	return ok
}

func TestActivityTracking(t *testing.T) {
	m := &Manager{}
	release := m.track("a")
	if d, _ := m.idleFor("a", time.Now().Add(time.Hour)); d != 0 {
		t.Errorf("idle %v while a call is open", d)
	}
	release()
	if d, _ := m.idleFor("a", time.Now().Add(time.Hour)); d < 59*time.Minute {
		t.Errorf("idle %v an hour after the call closed", d)
	}
}
