//go:build linux

package main

// Cleanliness: after every scenario both systems must be back where they
// started: no containers, tasks, active snapshots (the images' committed
// ones stay), state directories, mounts or processes. A leak fails the run.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	tasksapi "github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/pkg/namespaces"

	"github.com/boxd-dev/boxd/internal/testenv"
)

// cleanState counts what each system has. boxd and the ctr peer share
// containerd namespace boxd-bench; dockerd uses moby.
type cleanState struct {
	// boxd (and ctr)
	sandboxes, containers, tasks, activeSnaps, stateDirs, mounts, procs int
	// docker
	dContainers, dCtrdContainers, dTasks, dLayers, dMounts, dProcs int
}

func (s cleanState) boxdCells() string {
	return fmt.Sprintf("%d / %d / %d / %d / %d / %d / %d", s.sandboxes, s.containers, s.tasks, s.activeSnaps, s.stateDirs, s.mounts, s.procs)
}

func (s cleanState) dockerCells() string {
	return fmt.Sprintf("%d / %d / %d / %d / %d / %d", s.dContainers, s.dCtrdContainers, s.dTasks, s.dLayers, s.dMounts, s.dProcs)
}

// minus gives the counts above the baseline taken after set-up (image
// layers, dockerd's data-root bind mount).
func (s cleanState) minus(b cleanState) cleanState {
	return cleanState{
		s.sandboxes - b.sandboxes, s.containers - b.containers, s.tasks - b.tasks, s.activeSnaps - b.activeSnaps,
		s.stateDirs - b.stateDirs, s.mounts - b.mounts, s.procs - b.procs,
		s.dContainers - b.dContainers, s.dCtrdContainers - b.dCtrdContainers, s.dTasks - b.dTasks,
		s.dLayers - b.dLayers, s.dMounts - b.dMounts, s.dProcs - b.dProcs,
	}
}

func (s cleanState) zero() bool { return s == cleanState{} }

type cleanRow struct {
	scenario string
	left     cleanState // above baseline
	err      error
}

func (r cleanRow) ok() bool { return r.err == nil && r.left.zero() }

// state counts everything, in both systems.
func (e *env) state(ctx context.Context) (cleanState, error) {
	var s cleanState
	ids, err := e.boxd.list(ctx)
	if err != nil {
		return s, fmt.Errorf("boxd list: %w", err)
	}
	s.sandboxes = len(ids)
	if s.containers, s.tasks, s.activeSnaps, err = e.ctrdCounts(ctx, namespace); err != nil {
		return s, err
	}
	entries, _ := os.ReadDir(filepath.Join(e.stateDir, "sandboxes"))
	s.stateDirs = len(entries)

	dids, err := e.docker.list(ctx)
	if err != nil {
		return s, fmt.Errorf("docker list: %w", err)
	}
	s.dContainers = len(dids)
	if s.dCtrdContainers, s.dTasks, _, err = e.ctrdCounts(ctx, dockerNamespace); err != nil {
		return s, err
	}
	// dockerd 20.10 keeps container layers in its own overlay2 graph
	// driver, not in containerd's snapshotter: one directory per layer
	// ("l" holds short links).
	layers, _ := os.ReadDir(filepath.Join(e.dockerData, "overlay2"))
	for _, l := range layers {
		if l.Name() != "l" {
			s.dLayers++
		}
	}

	// Mounts: containerd's task bundles are per namespace; dockerd's
	// (overlay rootfs, /dev/shm, netns files) are under its directory.
	mps, err := testenv.MountsUnder(e.ctrd.Dir)
	if err != nil {
		return s, err
	}
	mobyBundles := filepath.Join(e.ctrd.Dir, "state", "io.containerd.runtime.v2.task", dockerNamespace) + "/"
	for _, mp := range mps {
		if strings.HasPrefix(mp, mobyBundles) {
			s.dMounts++
		} else {
			s.mounts++
		}
	}
	dmps, err := testenv.MountsUnder(e.dockerDir)
	if err != nil {
		return s, err
	}
	s.dMounts += len(dmps)

	procs := listProcs()
	shims := shimsFor(procs, e.ctrd.Address, namespace)
	s.procs = len(shims) + len(descendants(procs, shims))
	dshims := shimsFor(procs, e.ctrd.Address, dockerNamespace)
	s.dProcs = len(dshims) + len(descendants(procs, dshims))
	return s, nil
}

// ctrdCounts counts containers, tasks and active snapshots in one
// containerd namespace.
func (e *env) ctrdCounts(ctx context.Context, ns string) (containers, tasks, active int, err error) {
	ctx = namespaces.WithNamespace(ctx, ns)
	cs, err := e.cc.ContainerService().List(ctx)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("containerd %s containers: %w", ns, err)
	}
	ts, err := e.cc.TaskService().List(ctx, &tasksapi.ListTasksRequest{})
	if err != nil {
		return 0, 0, 0, fmt.Errorf("containerd %s tasks: %w", ns, err)
	}
	err = e.cc.SnapshotService("overlayfs").Walk(ctx, func(_ context.Context, info snapshots.Info) error {
		if info.Kind == snapshots.KindActive {
			active++
		}
		return nil
	})
	if err != nil {
		return 0, 0, 0, fmt.Errorf("containerd %s snapshots: %w", ns, err)
	}
	return len(cs), len(ts.Tasks), active, nil
}

// checkClean waits up to 10 s for both systems to be back at the baseline
// (a shim exits a moment after its task is deleted) and records the result.
func (e *env) checkClean(ctx context.Context, scenario string) cleanRow {
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := e.state(ctx)
		left := s.minus(e.baseline)
		if err == nil && left.zero() || time.Now().After(deadline) || ctx.Err() != nil {
			row := cleanRow{scenario: scenario, left: left, err: err}
			if !row.ok() {
				logf("LEAK after %s: boxd %s, docker %s %v", scenario, left.boxdCells(), left.dockerCells(), err)
				e.logLeftovers(ctx)
			}
			return row
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// checkTeardown verifies, after everything stopped, that nothing of the run
// is left on the host: no process mentioning its directories, no mount
// under them, no directory.
func checkTeardown(dir, ctrdDir string) error {
	var problems []string
	for _, d := range []string{dir, ctrdDir} {
		if d == "" {
			continue
		}
		if ps, _ := testenv.ProcessesUsing(d); len(ps) > 0 {
			problems = append(problems, fmt.Sprintf("processes using %s: %v", d, ps))
		}
		if mps, _ := testenv.MountsUnder(d); len(mps) > 0 {
			problems = append(problems, fmt.Sprintf("mounts under %s: %v", d, mps))
		}
		if os.Getenv("BENCH_KEEP") == "" && exists(d) {
			problems = append(problems, d+" still exists")
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return nil
}

// logLeftovers names what is left, for the boxd and docker logs kept after
// a failed run.
func (e *env) logLeftovers(ctx context.Context) {
	if ids, err := e.boxd.list(ctx); err == nil && len(ids) > 0 {
		logf("  boxd sandboxes: %v", ids)
	}
	if entries, _ := os.ReadDir(filepath.Join(e.stateDir, "sandboxes")); len(entries) > 0 {
		var names []string
		for _, d := range entries {
			names = append(names, d.Name())
		}
		logf("  boxd state dirs: %v", names)
	}
	if ids, err := e.docker.list(ctx); err == nil && len(ids) > 0 {
		logf("  docker containers: %v", ids)
	}
	procs := listProcs()
	for _, ns := range []string{namespace, dockerNamespace} {
		shims := shimsFor(procs, e.ctrd.Address, ns)
		for _, pid := range append(shims, descendants(procs, shims)...) {
			logf("  %s process %d: %s", ns, pid, strings.Join(procs[pid].cmdline, " "))
		}
	}
}
