//go:build linux

package main

// Scenario 6: density, the host memory an idle sandbox costs. For each
// system in turn (never both growing at once), starting from none of its
// sandboxes, it creates idle sandboxes up to each level and measures two
// ways:
//
//   - PSS (proportional set size, /proc/PID/smaps_rollup) of the shims
//     serving that system's containerd namespace, of every process under
//     them (boxd-init or sleep, as PID 1 of each sandbox), plus the growth
//     of the system's daemon (boxd or dockerd) and of the shared containerd
//     since the baseline. Shared pages are split among their users, so this
//     adds up to what these processes really hold, and other work on the
//     machine does not disturb it.
//   - the growth of MemTotal - MemAvailable (/proc/meminfo), which also
//     sees kernel memory no process's PSS shows (page tables, cgroups,
//     mounts, namespaces, overlayfs) but also everything else the machine
//     did meanwhile: noisy on a shared machine.
//
// Both are divided by the number of sandboxes.

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

type densityPoint struct {
	peer string
	n    int
	// KiB, totals over all n sandboxes
	shims, sandboxes, daemon, containerd, used int64
}

func (p densityPoint) pss() int64 { return p.shims + p.sandboxes + p.daemon + p.containerd }

type densitySnapshot struct {
	shims, sandboxes, daemon, containerd, used int64
}

// settle lets the daemons finish background work (GC, goroutines exiting)
// before a measurement.
func settle() { time.Sleep(2 * time.Second) }

func (e *env) densitySnapshot(ns string, daemonPid, ctrdPid int) densitySnapshot {
	procs := listProcs()
	shims := shimsFor(procs, e.ctrd.Address, ns)
	// The median of five readings of meminfo, half a second apart, damps
	// the noise of other work on the machine.
	var used []int64
	for i := 0; i < 5; i++ {
		used = append(used, usedKiB())
		time.Sleep(500 * time.Millisecond)
	}
	sort.Slice(used, func(i, j int) bool { return used[i] < used[j] })
	return densitySnapshot{
		shims:      sumPSS(shims),
		sandboxes:  sumPSS(descendants(procs, shims)),
		daemon:     pssKiB(daemonPid),
		containerd: pssKiB(ctrdPid),
		used:       used[len(used)/2],
	}
}

// scenarioDensity measures boxd, then docker, each alone. If keep is set
// it leaves both systems' sandboxes running instead and returns their ids
// (boxd's first), for the concurrency scenario to reuse: creating and
// removing 100 sandboxes of each takes three to four minutes on this
// machine. Docker's are then measured while boxd's idle ones exist. That
// only touches the proportional counts through pages the two share, the
// shim binary's above all: each of docker's shims then gets a slightly
// smaller share (tens of KiB) than boxd's did, which errs against boxd.
func scenarioDensity(ctx context.Context, e *env, cfg *config, keep bool) (_ []densityPoint, kept [][]string, _ error) {
	ctrdPid := 0
	if data, err := os.ReadFile(filepath.Join(e.ctrd.Dir, "containerd.pid")); err == nil {
		ctrdPid, _ = strconv.Atoi(strings.TrimSpace(string(data)))
	}
	type subject struct {
		api       sandboxAPI
		ns        string
		daemonPid int
	}
	subjects := []subject{
		{e.boxd, namespace, e.boxdProc.pid()},
		{e.docker, dockerNamespace, e.dockerdProc.pid()},
	}
	levels := append([]int(nil), cfg.density...)
	sort.Ints(levels)
	var out []densityPoint
	cleanup := func() {
		for k, ids := range kept {
			_ = removeMany(context.WithoutCancel(ctx), subjects[k].api, ids, 8)
		}
	}
	for _, s := range subjects {
		settle()
		base := e.densitySnapshot(s.ns, s.daemonPid, ctrdPid)
		var ids []string
		for _, level := range levels {
			logf("density: %s, %d idle sandboxes", s.api.name(), level)
			more, err := createMany(ctx, s.api, level-len(ids), 4)
			if err != nil {
				_ = removeMany(context.WithoutCancel(ctx), s.api, ids, 8)
				cleanup()
				return out, nil, err
			}
			ids = append(ids, more...)
			settle()
			m := e.densitySnapshot(s.ns, s.daemonPid, ctrdPid)
			p := densityPoint{
				peer: s.api.name(), n: level,
				shims: m.shims, sandboxes: m.sandboxes,
				daemon: m.daemon - base.daemon, containerd: m.containerd - base.containerd,
				used: m.used - base.used,
			}
			logf("density: %s %d: %d KiB PSS, %d KiB meminfo per sandbox", p.peer, level, p.pss()/int64(level), p.used/int64(level))
			out = append(out, p)
		}
		if !keep {
			if err := removeMany(context.WithoutCancel(ctx), s.api, ids, 8); err != nil {
				return out, nil, err
			}
			continue
		}
		kept = append(kept, ids)
	}
	if ctx.Err() != nil {
		cleanup()
		return out, nil, ctx.Err()
	}
	return out, kept, nil
}
