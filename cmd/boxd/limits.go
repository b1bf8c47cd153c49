//go:build linux

package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/boxd-dev/boxd/internal/disk"
	"github.com/boxd-dev/boxd/runtime"
)

// Daemon-wide totals and their defaults, chosen from the host boxd starts
// on. Every sandbox costs the host things no sandbox limit covers: a
// containerd shim (about 5 MiB of private memory and 11 threads measured
// here, more while it copies output), an overlay mount and a state
// directory. The defaults keep enough of the host outside the sandboxes'
// totals to pay for that and for boxd and containerd themselves.
const (
	// shimCost is the host memory one sandbox costs outside its limits,
	// rounded up from the shim's private memory plus kernel objects.
	shimCost = 8 << 20
	// shimPids is the host pids one sandbox's shim holds.
	shimPids = 16
	// daemonsCost is what boxd and containerd themselves use.
	daemonsCost = 256 << 20
)

// defaultDisk is --default-disk's value: a create that names no disk cap
// gets 10 GiB, so a sandbox an agent made cannot fill the host's disk
// (the image is sparse, so the cap costs only what is written). 0 turns
// the cap off and is only ever set explicitly.
const defaultDisk = "10g"

// hostFacts are the host's sizes the defaults derive from.
type hostFacts struct {
	memory int64 // bytes of RAM
	pids   int64 // min(kernel.pid_max, kernel.threads-max)
}

func readHost() hostFacts {
	var h hostFacts
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err == nil {
		h.memory = int64(si.Totalram) * int64(si.Unit)
	}
	h.pids = readSysctl("/proc/sys/kernel/pid_max", 32768) // 32768: the kernel's default
	h.pids = min(h.pids, readSysctl("/proc/sys/kernel/threads-max", h.pids))
	return h
}

func readSysctl(path string, fallback int64) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return fallback
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || v <= 0 {
		return fallback
	}
	return v
}

// memoryTotal is the default --max-memory-total: the host's RAM less a
// reserve of a tenth (at least 1 GiB) for the kernel, boxd, containerd and
// the shims; never less than half the RAM. Rounded down to a MiB.
func (h hostFacts) memoryTotal() int64 {
	return max(h.memory-max(h.memory/10, 1<<30), h.memory/2) &^ (1<<20 - 1)
}

// pidsTotal is the default --max-pids-total: half the host's pids, the
// other half left for the host and the shims (shimPids each).
func (h hostFacts) pidsTotal() int64 { return h.pids / 2 }

// maxSandboxes is the default --max-sandboxes: as many shims as the memory
// reserve and the host's half of the pids can carry, at least 16.
func (h hostFacts) maxSandboxes() int {
	byMemory := (h.memory - h.memoryTotal() - daemonsCost) / shimCost
	byPids := (h.pids - h.pidsTotal()) / shimPids
	return int(max(min(byMemory, byPids), 16))
}

func limitFlags(h hostFacts) []cli.Flag {
	return []cli.Flag{
		&cli.IntFlag{Name: "max-sandboxes", Value: h.maxSandboxes(), Usage: "most sandboxes at once, warm-pool members included; 0: no limit (default from the host: what its memory reserve and pids can carry in shims)"},
		&cli.StringFlag{Name: "max-memory-total", Value: formatSize(h.memoryTotal()), Usage: "memory limit over all sandboxes together (their parent cgroup); 0: none (default: RAM less a tenth, at least 1 GiB)"},
		&cli.Int64Flag{Name: "max-pids-total", Value: h.pidsTotal(), Usage: "pids limit over all sandboxes together (their parent cgroup); 0: none (default: half of kernel.pid_max)"},
		&cli.IntFlag{Name: "max-connections", Value: 256, Usage: "most API connections at once; one more is answered resource_exhausted and closed; 0: no limit"},
		&cli.DurationFlag{Name: "conn-idle-timeout", Value: 5 * time.Minute, Usage: "close an API connection with no call in progress for this long; 0: never"},
	}
}

// daemonLimits are the validated totals.
type daemonLimits struct {
	maxSandboxes  int
	pools         []runtime.PoolSize
	memoryTotal   int64 // 0: no limit
	pidsTotal     int64 // 0: no limit
	maxConns      int
	idleTimeout   time.Duration
	defaultMemory int64
	defaultPids   int64
	defaultDisk   int64
}

// parseLimits reads and checks the limit flags against each other, so a
// bad value stops boxd at start-up with the flag named.
func parseLimits(cc *cli.Context) (daemonLimits, error) {
	var l daemonLimits
	var err error
	if l.defaultMemory, err = runtime.ParseSize(cc.String("default-memory")); err != nil {
		return l, fmt.Errorf("--default-memory: %w", err)
	}
	if v := cc.String("default-disk"); v != "" {
		if l.defaultDisk, err = runtime.ParseSize(v); err != nil {
			return l, fmt.Errorf("--default-disk: %w", err)
		}
		if l.defaultDisk != 0 && l.defaultDisk < disk.MinBytes {
			return l, fmt.Errorf("--default-disk: %s is below the minimum of 16m (0: no cap)", v)
		}
	}
	l.defaultPids = cc.Int64("default-pids")
	if l.defaultPids <= 0 {
		return l, fmt.Errorf("--default-pids: %d must be positive", l.defaultPids)
	}
	v := cc.String("max-memory-total")
	if l.memoryTotal, err = runtime.ParseSize(v); err != nil {
		return l, fmt.Errorf("--max-memory-total: %w", err)
	}
	if l.memoryTotal > 0 && l.memoryTotal < l.defaultMemory {
		return l, fmt.Errorf("--max-memory-total: %s is below --default-memory %s", v, cc.String("default-memory"))
	}
	l.pidsTotal = cc.Int64("max-pids-total")
	switch {
	case l.pidsTotal < 0:
		return l, fmt.Errorf("--max-pids-total: %d must not be negative (0: no limit)", l.pidsTotal)
	case l.pidsTotal > 0 && l.pidsTotal < l.defaultPids:
		return l, fmt.Errorf("--max-pids-total: %d is below --default-pids %d", l.pidsTotal, l.defaultPids)
	}
	if l.maxSandboxes = cc.Int("max-sandboxes"); l.maxSandboxes < 0 {
		return l, fmt.Errorf("--max-sandboxes: %d must not be negative (0: no limit)", l.maxSandboxes)
	}
	if l.pools, err = parsePools(cc, l.maxSandboxes); err != nil {
		return l, err
	}
	if l.maxConns = cc.Int("max-connections"); l.maxConns < 0 {
		return l, fmt.Errorf("--max-connections: %d must not be negative (0: no limit)", l.maxConns)
	}
	if l.idleTimeout = cc.Duration("conn-idle-timeout"); l.idleTimeout < 0 {
		return l, fmt.Errorf("--conn-idle-timeout: %s must not be negative (0: never)", l.idleTimeout)
	}
	return l, nil
}

// formatSize writes n bytes in the largest unit ParseSize reads back
// exactly.
func formatSize(n int64) string {
	for _, u := range []struct {
		suffix string
		size   int64
	}{{"g", 1 << 30}, {"m", 1 << 20}, {"k", 1 << 10}} {
		if n >= u.size && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}
