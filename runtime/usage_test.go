//go:build linux

package runtime

import (
	"testing"

	v1 "github.com/containerd/cgroups/v3/cgroup1/stats"
	v2 "github.com/containerd/cgroups/v3/cgroup2/stats"
)

func TestUsageFromBothCgroupVersions(t *testing.T) {
	want := Usage{MemoryBytes: 100, MemoryPeak: 150, CPUUsec: 7, Pids: 3, OOMKills: 1}
	for name, m := range map[string]any{
		"v1": &v1.Metrics{
			Memory:           &v1.MemoryStat{Usage: &v1.MemoryEntry{Usage: 100, Max: 150}},
			CPU:              &v1.CPUStat{Usage: &v1.CPUUsage{Total: 7000}},
			Pids:             &v1.PidsStat{Current: 3},
			MemoryOomControl: &v1.MemoryOomControl{OomKill: 1},
		},
		"v2": &v2.Metrics{
			Memory:       &v2.MemoryStat{Usage: 100, MaxUsage: 150},
			CPU:          &v2.CPUStat{UsageUsec: 7},
			Pids:         &v2.PidsStat{Current: 3},
			MemoryEvents: &v2.MemoryEvents{OomKill: 1},
		},
	} {
		got, err := usageFrom(m)
		if err != nil || *got != want {
			t.Errorf("%s: %+v, %v; want %+v", name, got, err, want)
		}
	}
	if _, err := usageFrom("nonsense"); err == nil {
		t.Error("unknown metrics type accepted")
	}
	// Empty metrics (a cgroup file missing) give zeros, not a panic.
	if got, err := usageFrom(&v2.Metrics{}); err != nil || *got != (Usage{}) {
		t.Errorf("empty v2: %+v %v", got, err)
	}
}
