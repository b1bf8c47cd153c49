package e2e

import (
	"strconv"
	"strings"
	"testing"
)

// execStats runs boxctl exec --stats and returns the numbers of its stats
// line by name.
func execStats(t *testing.T, id string, args ...string) map[string]float64 {
	t.Helper()
	_, stderr, code := boxctlRun(append([]string{"exec", "--stats", id, "--"}, args...)...)
	if code != 0 {
		t.Fatalf("exec --stats %q: exit %d, stderr %q", args, code, stderr)
	}
	_, line, ok := strings.Cut(stderr, "boxctl: stats: ")
	if !ok {
		t.Fatalf("exec --stats %q printed no stats: %q", args, stderr)
	}
	line, _, _ = strings.Cut(line, "\n")
	f := strings.Fields(line)
	out := map[string]float64{}
	for i := 0; i+1 < len(f); i += 2 {
		v, err := strconv.ParseFloat(strings.TrimSuffix(f[i+1], "s"), 64)
		if err != nil {
			t.Fatalf("stats line %q: %s: %v", line, f[i], err)
		}
		out[f[i]] = v
	}
	return out
}

// TestExecStatsPeakMemory: a command that fills a 200 MiB buffer reports
// a peak within 10% of it.
func TestExecStatsPeakMemory(t *testing.T) {
	id := newSandbox(t, "--memory", "512m")
	s := execStats(t, id, "dd", "if=/dev/zero", "of=/dev/null", "bs=200M", "count=1")
	const want = 200 << 20
	if p := s["peak_memory"]; p < want*0.9 || p > want*1.1 {
		t.Errorf("peak memory %.0f bytes, want 200 MiB within 10%% (stats %v)", p, s)
	}
	if s["wall"] <= 0 {
		t.Errorf("wall time %v, want > 0", s["wall"])
	}
}

// TestExecStatsCPU: a command that burns one second of CPU (by its own
// count, in /proc/self/stat, with shell builtins only) reports about one.
func TestExecStatsCPU(t *testing.T) {
	id := newSandbox(t)
	s := execStats(t, id, "sh", "-c", `while :; do read -r l < /proc/$$/stat; set -- $l; [ $((${14}+${15})) -ge 100 ] && break; done`)
	if cpu := s["user"] + s["system"]; cpu < 0.95 || cpu > 1.3 {
		t.Errorf("CPU %.3fs (user %.3fs, system %.3fs), want about 1s", cpu, s["user"], s["system"])
	}
	if s["wall"] < 0.95 {
		t.Errorf("wall %.3fs, shorter than the CPU the command burned", s["wall"])
	}
}
