//go:build linux

// Room: reconcile. The background pass (Run, ReconcileOnce): TTL and
// idle expiry, leftovers thawed, dead inits restarted.

package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"

	"github.com/boxd-dev/boxd/internal/events"
)

// ReconcileOnce destroys every sandbox whose TTL has passed and restarts
// the init of every other sandbox whose init is gone (a host reboot, an init
// killed from outside): processes are lost then, files are not. It reports
// how many sandboxes it destroyed and restarted.
func (m *Manager) ReconcileOnce(ctx context.Context) (expired, restarted int, _ error) {
	ctx = namespaces.WithNamespace(ctx, m.cfg.Namespace)
	m.pruneInventory(ctx)
	m.retryDeletes(ctx)
	m.sweepOrphanSnapshots(ctx)
	m.collectNetworks(ctx)
	defer m.relistenAll(ctx)
	ctrs, err := m.cfg.Client.Containers(ctx, fmt.Sprintf(`labels."%s"==true`, LabelManaged))
	if err != nil {
		return 0, 0, fmt.Errorf("reconcile: list: %w", err)
	}
	now := time.Now()
	ids := make([]string, 0, len(ctrs))
	for _, ctr := range ctrs {
		ids = append(ids, ctr.ID())
	}
	m.refreshPaused(ctx, ids)
	var errs []error
	for _, ctr := range ctrs {
		labels, err := ctr.Labels(ctx)
		if err != nil {
			continue
		}
		if exp, err := time.Parse(time.RFC3339, labels[LabelExpiresAt]); err == nil && !now.Before(exp) {
			m.log.Info("ttl expired", "sandbox", ctr.ID(), "expired_at", exp)
			m.cfg.Events.Emit(events.Expired, ctr.ID(), ownerOf(labels), map[string]string{"expires_at": exp.UTC().Format(time.RFC3339)})
			if err := m.destroy(ctx, ctr); err != nil {
				errs = append(errs, err)
				continue
			}
			expired++
			continue
		}
		if m.frozenByBoxd(ctr.ID(), labels) {
			m.thawLeftover(ctx, ctr)
			m.refreshPaused(ctx, []string{ctr.ID()}) // not paused by a user: thawed now
		}
		if gone, err := m.checkIdle(ctx, ctr, labels, now); err != nil {
			errs = append(errs, err)
		} else if gone {
			continue
		}
		if err := trimLog(m.initLogPath(ctr.ID()), initLogMax, initLogKeep); err != nil {
			m.log.Warn("init log", "sandbox", ctr.ID(), "err", err)
		}
		did, err := m.restartIfDead(ctx, ctr)
		if err != nil {
			errs = append(errs, err)
		}
		if did {
			restarted++
		}
	}
	return expired, restarted, errors.Join(errs...)
}

// dead reports whether a sandbox that still exists has no running init.
// One task lookup gives the status too: each lookup is a State call to
// the shim, which under gVisor runs a whole `runsc state` (a process of
// the 100 MB runsc binary, tens of ms of CPU), for every sandbox at every
// reconcile tick; loading the task and then asking its status were two.
func (m *Manager) dead(ctx context.Context, ctr client.Container) bool {
	if _, err := ctr.Info(ctx, client.WithoutRefreshedMetadata); err != nil {
		return false
	}
	resp, err := m.cfg.Client.TaskService().Get(ctx, &tasks.GetRequest{ContainerID: ctr.ID()})
	if errdefs.IsNotFound(errgrpc.ToNative(err)) {
		return true
	}
	if err != nil || resp.Process == nil {
		return false
	}
	return resp.Process.Status == task.Status_STOPPED
}

// Run does the background upkeep now and then every interval until ctx
// ends: expiry and restarts. The first pass catches what happened while
// boxd was down.
func (m *Manager) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, _, err := m.ReconcileOnce(ctx); err != nil && ctx.Err() == nil {
			m.log.Error("reconcile", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
