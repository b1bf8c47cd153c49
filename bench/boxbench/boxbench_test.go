//go:build linux

package main

// Unit tests of the parts that need no daemon: Docker's stream framing,
// the statistics, and rendering (Markdown and charts) from synthetic
// results. The benchmark itself runs with `make bench`.

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot/plotter"
)

func frame(stream byte, payload string) []byte {
	h := make([]byte, 8)
	h[0] = stream
	binary.BigEndian.PutUint32(h[4:], uint32(len(payload)))
	return append(h, payload...)
}

func TestDemux(t *testing.T) {
	var in bytes.Buffer
	in.Write(frame(1, "hello "))
	in.Write(frame(2, "oops"))
	in.Write(frame(1, "world"))
	in.Write(frame(1, ""))
	var out, errb bytes.Buffer
	if err := demux(&in, &out, &errb); err != nil {
		t.Fatal(err)
	}
	if out.String() != "hello world" || errb.String() != "oops" {
		t.Fatalf("stdout %q, stderr %q", out.String(), errb.String())
	}
	// A stream cut inside a frame is an error, not a short read.
	cut := frame(1, "truncated")
	if err := demux(bytes.NewReader(cut[:12]), &out, &errb); err == nil {
		t.Fatal("no error for a truncated frame")
	}
}

func TestQuantile(t *testing.T) {
	var s []time.Duration
	for i := 100; i >= 1; i-- {
		s = append(s, time.Duration(i)*time.Millisecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 50 * time.Millisecond}, {0.95, 95 * time.Millisecond}, {0.99, 99 * time.Millisecond}, {1, 100 * time.Millisecond}, {0, time.Millisecond}} {
		if got := quantile(s, c.q); got != c.want {
			t.Errorf("quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	if s[0] != 100*time.Millisecond {
		t.Error("quantile sorted its input in place")
	}
	if quantile(nil, 0.5) != 0 {
		t.Error("quantile of nothing is not 0")
	}
}

func TestTicks(t *testing.T) {
	if ts := (ticks125{}).Ticks(3, 800); len(ts) != 7 { // 5 10 20 50 100 200 500
		t.Errorf("ticks for [3, 800]: %v", ts)
	}
	if ts := (ticks125{}).Ticks(300, 450); len(ts) < 2 {
		t.Errorf("a narrow range gets too few ticks: %v", ts)
	}
}

func durations(base time.Duration, n int) []time.Duration {
	s := make([]time.Duration, n)
	for i := range s {
		s[i] = base + time.Duration(i)*base/20
	}
	return s
}

func TestRender(t *testing.T) {
	dir := t.TempDir()
	rep := &report{
		started: time.Now(), elapsed: time.Minute,
		cfg:     &config{n: 3, burst: 5, burstRounds: 1, levels: []int{1, 5}, execsPer: 2, density: []int{5}},
		machine: [][2]string{{"CPU", "2 cores"}},
		lats: []*latency{{
			scenario: "exec", peers: []string{"boxctl exec", "docker exec"},
			samples: map[string][]time.Duration{"boxctl exec": durations(30*time.Millisecond, 10), "docker exec": durations(150*time.Millisecond, 10)},
			errors:  map[string]int{"docker exec": 1}, firstErr: map[string]string{"docker exec": "exit 1 | `x`"},
		}, {
			// A difference row can be negative: in the table, not on the
			// chart's log scale (which would panic).
			scenario: "floor", peers: []string{"part", "beyond"},
			samples: map[string][]time.Duration{"part": durations(time.Millisecond, 10), "beyond": append(durations(time.Millisecond, 9), -time.Millisecond)},
			errors:  map[string]int{}, firstErr: map[string]string{},
		}},
		bursts: []*burstResult{{peer: "boxd API", n: 5, samples: durations(time.Second, 5), walls: []time.Duration{2 * time.Second}}},
		conc: []*concResult{
			{level: 1, peer: "boxd API", execs: 2, wall: time.Second, lat: durations(10*time.Millisecond, 2)},
			{level: 1, peer: "Docker Engine API", execs: 2, wall: 2 * time.Second, lat: durations(90*time.Millisecond, 2)},
			{level: 5, peer: "boxd API", execs: 10, wall: time.Second, lat: durations(20*time.Millisecond, 10)},
			{level: 5, peer: "Docker Engine API", execs: 10, wall: 5 * time.Second, lat: durations(400*time.Millisecond, 10)},
		},
		density: []densityPoint{{peer: "boxd API", n: 5, shims: 5 * 6000, sandboxes: 5 * 1200}, {peer: "Docker Engine API", n: 5, shims: 5 * 6000, sandboxes: 5 * 200}},
		clean:   []cleanRow{{scenario: "exec"}, {scenario: "tti", left: cleanState{procs: 1}}, {scenario: "teardown"}},
	}
	if err := writeResults(dir, rep); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "latest.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| exec | docker exec | 10 | 1 |", "5.00×", "**LEAK**", "190 ms", "![latency](latency.png)", "![concurrency](concurrency.png)", "exit 1 \\| 'x'"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("latest.md lacks %q:\n%s", want, md)
		}
	}
	for _, png := range []string{"latency.png", "concurrency.png"} {
		data, err := os.ReadFile(filepath.Join(dir, png))
		if err != nil || !bytes.HasPrefix(data, []byte("\x89PNG")) {
			t.Errorf("%s: not a PNG (%v)", png, err)
		}
	}
}

// TestTicksHostileRange: a log axis from zero, below zero or to infinity
// gets no ticks instead of a loop over powers of ten that never ends.
func TestTicksHostileRange(t *testing.T) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, r := range [][2]float64{{0, 10}, {-1, 10}, {math.Inf(-1), 10}, {1, math.Inf(1)}, {math.NaN(), 1}, {10, 1}} {
			if ts := (ticks125{}).Ticks(r[0], r[1]); len(ts) != 0 {
				t.Errorf("ticks for %v: %v", r, ts)
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("ticks for a hostile range did not return within 10 s")
	}
}

// TestRenderHostileValues: rows whose values cannot stand on a log scale
// (zero, negative, a zero wall time) are left out of the charts and named
// in the report, the tables are all there, and it all ends in time.
func TestRenderHostileValues(t *testing.T) {
	dir := t.TempDir()
	zeros := make([]time.Duration, 5)
	rep := &report{
		started: time.Now(), elapsed: time.Minute,
		cfg:     &config{n: 3, burst: 5, burstRounds: 1, levels: []int{1, 5}, execsPer: 2, density: []int{5}},
		machine: [][2]string{{"CPU", "2 cores"}},
		lats: []*latency{{
			scenario: "exec", peers: []string{"boxctl exec", "broken"},
			samples: map[string][]time.Duration{"boxctl exec": durations(30*time.Millisecond, 10), "broken": zeros},
			errors:  map[string]int{}, firstErr: map[string]string{},
		}, {
			scenario: "all below zero", peers: []string{"diff"},
			samples: map[string][]time.Duration{"diff": {-time.Millisecond, -2 * time.Millisecond}},
			errors:  map[string]int{}, firstErr: map[string]string{},
		}},
		bursts: []*burstResult{{peer: "boxd API", n: 5, samples: zeros, walls: []time.Duration{0}}},
		conc: []*concResult{
			{level: 1, peer: "boxd API", execs: 2, wall: 0, lat: zeros},
			{level: 5, peer: "boxd API", execs: 10, wall: time.Second, lat: zeros},
		},
	}
	done := make(chan error, 1)
	go func() { done <- writeResults(dir, rep) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("writeResults did not end within 30 s on hostile values")
	}
	md, err := os.ReadFile(filepath.Join(dir, "latest.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| exec | broken |", "latency.png leaves out exec, broken", "latency.png leaves out all below zero, diff",
		"latency.png leaves out time to interactive, burst of 5, boxd API", "concurrency.png leaves out concurrency 5, boxd API", "![latency](latency.png)"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("latest.md lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(string(md), "![concurrency]") {
		t.Errorf("a concurrency chart with no drawable point is listed:\n%s", md)
	}
}

// TestChartsHostileFloats draws charts straight from values no measurement
// should give but a broken one can: 0, -1, NaN, +Inf, -Inf, next to a
// single point and a box whose values are all equal. Each chart ends
// within a time limit, leaves out exactly the boxes that cannot stand on
// its log scale, and the rest makes a PNG.
func TestChartsHostileFloats(t *testing.T) {
	dir := t.TempDir()
	hostile := map[string]float64{"zero": 0, "minus one": -1, "NaN": math.NaN(), "+Inf": math.Inf(1), "-Inf": math.Inf(-1)}
	var panels []boxPanel
	var want []string
	for name, v := range hostile {
		// Alone, and among good values: either way out of the chart.
		panels = append(panels, boxPanel{title: name, names: []string{"alone", "mixed", "good"},
			values: []plotter.Values{{v}, {3, v, 5}, {3, 4, 5}}})
		want = append(want, name+", alone", name+", mixed")
	}
	panels = append(panels,
		boxPanel{title: "single point", names: []string{"one"}, values: []plotter.Values{{7}}},
		boxPanel{title: "all equal", names: []string{"same"}, values: []plotter.Values{{2, 2, 2, 2}}})
	conc := []*concResult{
		{level: 1, peer: "single", execs: 1, wall: time.Second, lat: []time.Duration{time.Millisecond}},
		{level: 0, peer: "zero level", execs: 1, wall: time.Second, lat: []time.Duration{time.Millisecond}},
		{level: 2, peer: "negative wall", execs: 1, wall: -time.Second, lat: []time.Duration{time.Millisecond}},
		{level: 2, peer: "zero latency", execs: 3, wall: time.Second, lat: make([]time.Duration, 3)},
		{level: 4, peer: "equal", execs: 2, wall: time.Second, lat: []time.Duration{time.Millisecond, time.Millisecond}},
		{level: 8, peer: "equal", execs: 2, wall: time.Second, lat: []time.Duration{time.Millisecond, time.Millisecond}},
	}
	type result struct {
		lat, conc []string
		err       error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		if r.lat, r.err = writeLatencyChart(filepath.Join(dir, "latency.png"), panels); r.err == nil {
			r.conc, r.err = writeConcurrencyChart(filepath.Join(dir, "concurrency.png"), conc)
		}
		done <- r
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("charts from hostile values were not drawn within 30 s")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	sort.Strings(want)
	sort.Strings(r.lat)
	if !slices.Equal(r.lat, want) {
		t.Errorf("latency chart left out %q, want %q", r.lat, want)
	}
	wantConc := []string{"concurrency 0, zero level", "concurrency 2, negative wall", "concurrency 2, zero latency"}
	sort.Strings(r.conc)
	if !slices.Equal(r.conc, wantConc) {
		t.Errorf("concurrency chart left out %q, want %q", r.conc, wantConc)
	}
	for _, png := range []string{"latency.png", "concurrency.png"} {
		data, err := os.ReadFile(filepath.Join(dir, png))
		if err != nil || !bytes.HasPrefix(data, []byte("\x89PNG")) {
			t.Errorf("%s: not a PNG (%v)", png, err)
		}
	}
}
