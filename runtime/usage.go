//go:build linux

package runtime

import (
	"context"
	"fmt"

	v1 "github.com/containerd/cgroups/v3/cgroup1/stats"
	v2 "github.com/containerd/cgroups/v3/cgroup2/stats"
	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/typeurl/v2"
)

// Usage is what a sandbox consumes now, read from its cgroup.
type Usage struct {
	MemoryBytes uint64 // current memory use, page cache included
	MemoryPeak  uint64 // high-water mark (v1: max_usage; v2: peak where the kernel reports it)
	CPUUsec     uint64 // CPU time used since start
	Pids        uint64 // processes now
	OOMKills    uint64 // processes the kernel OOM-killed in this sandbox
}

// usage reads a task's cgroup metrics. containerd returns cgroup v1 or v2
// types depending on the host; both are handled, since most hosts run v2
// while this one runs v1.
func usage(ctx context.Context, task client.Task) (*Usage, error) {
	m, err := task.Metrics(ctx)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	v, err := typeurl.UnmarshalAny(m.Data)
	if err != nil {
		return nil, fmt.Errorf("metrics: decode: %w", err)
	}
	return usageFrom(v)
}

func usageFrom(v any) (*Usage, error) {
	switch s := v.(type) {
	case *v1.Metrics:
		return &Usage{
			MemoryBytes: s.GetMemory().GetUsage().GetUsage(),
			MemoryPeak:  s.GetMemory().GetUsage().GetMax(),
			CPUUsec:     s.GetCPU().GetUsage().GetTotal() / 1000,
			Pids:        s.GetPids().GetCurrent(),
			OOMKills:    s.GetMemoryOomControl().GetOomKill(),
		}, nil
	case *v2.Metrics:
		return &Usage{
			MemoryBytes: s.GetMemory().GetUsage(),
			MemoryPeak:  s.GetMemory().GetMaxUsage(),
			CPUUsec:     s.GetCPU().GetUsageUsec(),
			Pids:        s.GetPids().GetCurrent(),
			OOMKills:    s.GetMemoryEvents().GetOomKill(),
		}, nil
	}
	return nil, fmt.Errorf("metrics: unexpected type %T", v)
}
