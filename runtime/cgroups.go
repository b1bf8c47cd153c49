//go:build linux

// Room: resources. Cgroup limits: per sandbox, and the daemon-wide
// totals all sandboxes sit under.

package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/containerd/cgroups/v3"
	"github.com/containerd/cgroups/v3/cgroup1"
	"github.com/containerd/cgroups/v3/cgroup2"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/runtime-spec/specs-go"
)

// setLimits writes a running sandbox's memory, CPU and pids limits straight
// into its cgroup, v2 or v1 alike: about a millisecond, where a task update
// (a runc process) costs 45 ms here. Devices and the rest of the spec's
// resources are left alone. path is the spec's cgroupsPath (cgroupfs).
func setLimits(path string, res *specs.LinuxResources) error {
	only := &specs.LinuxResources{Memory: res.Memory, CPU: res.CPU, Pids: res.Pids}
	if cgroups.Mode() == cgroups.Unified {
		m, err := cgroup2.Load(path)
		if err != nil {
			return fmt.Errorf("cgroup %s: %w", path, err)
		}
		return m.Update(cgroup2.ToResources(only))
	}
	cg, err := cgroup1.Load(cgroup1.StaticPath(path))
	if err != nil {
		return fmt.Errorf("cgroup %s: %w", path, err)
	}
	return cg.Update(only)
}

// The parent cgroup: every sandbox's cgroup is /<namespace>/<id>
// (cgroupsPath), so /<namespace> holds them all, and the daemon-wide
// memory and pids totals are set there. The kernel enforces them over the
// sum of the sandboxes: a sandbox that would push the total over gets
// reclaim and then the OOM killer (memory) or a failed fork (pids), as it
// does at its own limit. boxd does not refuse creates by the sum of the
// sandboxes' limits (they are ceilings, not reservations, and most
// sandboxes use a small part of theirs); it refuses a create that cannot
// start because the pids total is all but used up (startPids), and one
// whose own limit is above a total.

// startPids is how many pids a sandbox needs to start: runc's init and
// then boxd-init, a Go program with a handful of threads.
const startPids = 16

// totals is where the parent cgroup's limits live on this host.
type totals struct {
	memory, pids int64
	// pidsDir is the parent's directory holding pids.current and pids.max.
	pidsDir string
}

func parentCgroup(namespace string) string { return "/" + namespace }

// unifiedMountpoint is where cgroup v2 is mounted.
const unifiedMountpoint = "/sys/fs/cgroup"

// applyTotals creates the parent cgroup with its limits. A total of 0 is no
// limit, and lifts one a previous boxd set; with both 0 boxd leaves the
// cgroup tree alone (for hosts where it may not write there).
func (m *Manager) applyTotals() error {
	group := parentCgroup(m.cfg.Namespace)
	if m.cfg.TotalMemory <= 0 && m.cfg.TotalPids <= 0 {
		m.log.Info("no daemon-wide memory or pids total: the parent cgroup is left as it is", "cgroup", group)
		return nil
	}
	var err error
	if cgroups.Mode() == cgroups.Unified {
		m.totals, err = setTotalsV2(unifiedMountpoint, group, m.cfg.TotalMemory, m.cfg.TotalPids)
	} else {
		m.totals, err = setTotalsV1(v1MemoryPids, group, m.cfg.TotalMemory, m.cfg.TotalPids)
	}
	if err != nil {
		return fmt.Errorf("daemon-wide totals (max-memory-total %d, max-pids-total %d) on cgroup %s: %w", m.cfg.TotalMemory, m.cfg.TotalPids, group, err)
	}
	m.log.Info("daemon-wide totals set", "cgroup", group, "max_memory_total", m.cfg.TotalMemory, "max_pids_total", m.cfg.TotalPids)
	return nil
}

// setTotalsV2 sets memory.max and pids.max on group under mountpoint,
// enabling the memory and pids controllers on the way down to it.
func setTotalsV2(mountpoint, group string, memory, pids int64) (totals, error) {
	res := &cgroup2.Resources{Memory: &cgroup2.Memory{}, Pids: &cgroup2.Pids{Max: -1}}
	if memory > 0 {
		res.Memory.Max = &memory
	}
	if pids > 0 {
		res.Pids.Max = pids
	}
	if _, err := cgroup2.NewManager(mountpoint, group, res); err != nil {
		return totals{}, err
	}
	dir := filepath.Join(mountpoint, group)
	if memory <= 0 {
		// cgroup2.Memory writes numbers only; "max" is how v2 says none.
		if err := os.WriteFile(filepath.Join(dir, "memory.max"), []byte("max"), 0o644); err != nil {
			return totals{}, err
		}
	}
	return totals{memory: memory, pids: pids, pidsDir: dir}, nil
}

// v1MemoryPids is the part of the host's v1 hierarchy the totals use.
func v1MemoryPids() ([]cgroup1.Subsystem, error) {
	all, err := cgroup1.Default()
	if err != nil {
		return nil, err
	}
	var out []cgroup1.Subsystem
	for _, s := range all {
		if s.Name() == cgroup1.Memory || s.Name() == cgroup1.Pids {
			out = append(out, s)
		}
	}
	return out, nil
}

// setTotalsV1 sets memory.limit_in_bytes and pids.max on group in the
// memory and pids hierarchies h returns (hierarchical accounting is always
// on in the kernels runc supports).
func setTotalsV1(h cgroup1.Hierarchy, group string, memory, pids int64) (totals, error) {
	subs, err := h()
	if err != nil {
		return totals{}, err
	}
	var pidsDir string
	for _, s := range subs {
		if s.Name() == cgroup1.Pids {
			pidsDir = s.(interface{ Path(string) string }).Path(group)
		}
	}
	if pidsDir == "" {
		return totals{}, errors.New("no pids controller in the cgroup v1 hierarchy")
	}
	limit := int64(-1) // v1's "no limit"
	if memory > 0 {
		limit = memory
	}
	res := &specs.LinuxResources{Memory: &specs.LinuxMemory{Limit: &limit}, Pids: &specs.LinuxPids{Limit: &pids}}
	if _, err := cgroup1.New(cgroup1.StaticPath(group), res, cgroup1.WithHierarchy(h)); err != nil {
		return totals{}, err
	}
	if pids <= 0 {
		// cgroup1's pids controller writes positive limits only.
		if err := os.WriteFile(filepath.Join(pidsDir, "pids.max"), []byte("max"), 0o644); err != nil {
			return totals{}, err
		}
	}
	return totals{memory: memory, pids: pids, pidsDir: pidsDir}, nil
}

// pidsInUse reads how many pids the sandboxes hold in all.
func (t totals) pidsInUse() (int64, error) {
	b, err := os.ReadFile(filepath.Join(t.pidsDir, "pids.current"))
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// pidsExhausted returns a resource_exhausted error naming max-pids-total
// when fewer than startPids are left under it, else nil. It reads one
// kernel file.
func (t totals) pidsExhausted() error {
	if t.pids <= 0 || t.pidsDir == "" {
		return nil
	}
	used, err := t.pidsInUse()
	if err != nil || t.pids-used >= startPids {
		return nil
	}
	return fmt.Errorf("the daemon's max-pids-total of %d is used up (%d pids in sandboxes; a sandbox needs %d to start): %w", t.pids, used, startPids, errdefs.ErrResourceExhausted)
}

// admit checks the daemon-wide totals for a new sandbox and counts it
// against max-sandboxes.
func (m *Manager) admit(ctx context.Context, id string, member bool) error {
	if err := m.totals.pidsExhausted(); err != nil {
		return err
	}
	return m.reserve(ctx, id, member)
}

// explainFailure turns a failed start into resource_exhausted when the
// pids total is why (runc's own error says only "resource temporarily
// unavailable").
func (m *Manager) explainFailure(err error) error {
	if perr := m.totals.pidsExhausted(); perr != nil {
		return fmt.Errorf("%w (%v)", perr, err)
	}
	return err
}
