//go:build linux

// Room: describe. A sandbox's resource usage read from its cgroup and
// network namespace.

package runtime

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/containerd/cgroups/v3"
	v1 "github.com/containerd/cgroups/v3/cgroup1/stats"
	v2 "github.com/containerd/cgroups/v3/cgroup2/stats"
	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/typeurl/v2"
)

// Usage is what a sandbox consumes now, read from its cgroup.
type Usage struct {
	MemoryBytes uint64 // current memory use, page cache included
	MemoryPeak  uint64 // high-water mark (v1: max_usage; v2: memory.peak where the kernel has it)
	MemoryLimit uint64 // the cgroup's limit as the kernel has it (0: not read)
	CPUUsec     uint64 // CPU time used since start
	Pids        uint64 // processes now
	OOMKills    uint64 // processes the kernel OOM-killed in this sandbox
	// Block I/O the sandbox's processes caused on the host's block devices
	// (v1 blkio, v2 io.stat), summed over devices.
	BlockReadBytes, BlockWriteBytes uint64
	// Network bytes on the sandbox's interfaces other than loopback, from
	// its network namespace; Network is false when it has none.
	Network                bool
	NetRxBytes, NetTxBytes uint64
}

// usage reads a task's cgroup figures. On cgroup v2 boxd reads the
// sandbox's cgroup files itself (usageV2); on v1 it asks containerd, which
// reads the many v1 hierarchies for it. Most hosts run v2 while this one
// runs v1: the v2 parsing is tested against recorded files.
func usage(ctx context.Context, task client.Task, cgPath string) (*Usage, error) {
	if cgroups.Mode() == cgroups.Unified {
		return usageV2(filepath.Join(unifiedMountpoint, cgPath))
	}
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
		u := &Usage{
			MemoryBytes: s.GetMemory().GetUsage().GetUsage(),
			MemoryPeak:  s.GetMemory().GetUsage().GetMax(),
			MemoryLimit: s.GetMemory().GetUsage().GetLimit(),
			CPUUsec:     s.GetCPU().GetUsage().GetTotal() / 1000,
			Pids:        s.GetPids().GetCurrent(),
			OOMKills:    s.GetMemoryOomControl().GetOomKill(),
		}
		for _, e := range s.GetBlkio().GetIoServiceBytesRecursive() {
			switch strings.ToLower(e.Op) {
			case "read":
				u.BlockReadBytes += e.Value
			case "write":
				u.BlockWriteBytes += e.Value
			}
		}
		return u, nil
	case *v2.Metrics:
		u := &Usage{
			MemoryBytes: s.GetMemory().GetUsage(),
			MemoryPeak:  s.GetMemory().GetMaxUsage(),
			MemoryLimit: s.GetMemory().GetUsageLimit(),
			CPUUsec:     s.GetCPU().GetUsageUsec(),
			Pids:        s.GetPids().GetCurrent(),
			OOMKills:    s.GetMemoryEvents().GetOomKill(),
		}
		for _, e := range s.GetIo().GetUsage() {
			u.BlockReadBytes += e.Rbytes
			u.BlockWriteBytes += e.Wbytes
		}
		return u, nil
	}
	return nil, fmt.Errorf("metrics: unexpected type %T", v)
}

// usageV2 reads a cgroup v2 directory: cpu.stat, memory.current,
// memory.peak (kernel 5.19+; absent before), memory.max, memory.events,
// pids.current and io.stat. A missing optional file leaves its figure 0.
func usageV2(dir string) (*Usage, error) {
	u := &Usage{}
	cpu, err := keyed(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		return nil, err
	}
	u.CPUUsec = cpu["usage_usec"]
	if u.MemoryBytes, err = single(filepath.Join(dir, "memory.current")); err != nil {
		return nil, err
	}
	if u.MemoryPeak, err = single(filepath.Join(dir, "memory.peak")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if u.MemoryLimit, err = single(filepath.Join(dir, "memory.max")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	ev, err := keyed(filepath.Join(dir, "memory.events"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	u.OOMKills = ev["oom_kill"]
	if u.Pids, err = single(filepath.Join(dir, "pids.current")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(dir, "io.stat"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	u.BlockReadBytes, u.BlockWriteBytes = parseIOStat(string(b))
	return u, nil
}

// single reads a file holding one number; "max" (no limit) reads as 0.
func single(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("cgroup: %w", err)
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cgroup %s: %q is not a number", path, s)
	}
	return n, nil
}

// keyed reads a flat keyed file ("key value" per line).
func keyed(path string) (map[string]uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	out := map[string]uint64{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64); err == nil {
			out[k] = n
		}
	}
	return out, nil
}

// parseIOStat sums rbytes and wbytes over the devices of a v2 io.stat
// ("8:0 rbytes=1 wbytes=2 rios=3 wios=4 dbytes=0 dios=0" per line).
func parseIOStat(s string) (read, write uint64) {
	for _, line := range strings.Split(s, "\n") {
		fields := strings.Fields(line)
		for _, f := range fields[min(1, len(fields)):] {
			k, v, ok := strings.Cut(f, "=")
			if !ok {
				continue
			}
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				continue
			}
			switch k {
			case "rbytes":
				read += n
			case "wbytes":
				write += n
			}
		}
	}
	return read, write
}

// netBytes reads the byte counters of a network namespace's interfaces
// other than loopback from /proc/PID/net/dev, as seen by a process in it.
func netBytes(pid uint32) (rx, tx uint64, _ error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/net/dev", pid))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	return parseNetDev(bufio.NewScanner(f))
}

// parseNetDev sums receive and transmit bytes over the interfaces of a
// /proc/net/dev listing, loopback excluded.
func parseNetDev(sc *bufio.Scanner) (rx, tx uint64, _ error) {
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || strings.TrimSpace(name) == "lo" {
			continue // the two header lines have no colon
		}
		f := strings.Fields(rest)
		if len(f) < 9 {
			return 0, 0, fmt.Errorf("net/dev: short line %q", sc.Text())
		}
		r, err1 := strconv.ParseUint(f[0], 10, 64)
		t, err2 := strconv.ParseUint(f[8], 10, 64)
		if err1 != nil || err2 != nil {
			return 0, 0, fmt.Errorf("net/dev: malformed line %q", sc.Text())
		}
		rx += r
		tx += t
	}
	return rx, tx, sc.Err()
}
