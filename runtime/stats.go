//go:build linux

// Room: describe. Stats of running sandboxes, and containerd's task
// events turned into boxd's (OOM kills, init exits).

package runtime

import (
	"context"
	"fmt"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	"github.com/containerd/typeurl/v2"

	apievents "github.com/containerd/containerd/api/events"

	"github.com/boxd-dev/boxd/internal/events"
	"github.com/boxd-dev/boxd/network"
)

// Stats is one sample of a sandbox's resource use.
type Stats struct {
	ID, Name, State string
	MemoryLimit     int64 // the sandbox's limit as boxd set it
	Usage           Usage
	At              time.Time
}

// MaxStatsSandboxes bounds the ids one stats call may name.
const MaxStatsSandboxes = 256

// Stats samples the named sandboxes, or, when none is named, the ones
// List shows the caller (its own). A named sandbox that does not exist,
// or is another user's, is not_found; one without a running init reports
// its state with zero figures.
func (m *Manager) Stats(ctx context.Context, idsOrNames []string) ([]Stats, error) {
	ctx = namespaces.WithNamespace(ctx, m.cfg.Namespace)
	if len(idsOrNames) > MaxStatsSandboxes {
		return nil, fieldErr("ids", "%d sandboxes named, at most %d", len(idsOrNames), MaxStatsSandboxes)
	}
	var ctrs []client.Container
	if len(idsOrNames) == 0 {
		filter, err := listOwnerFilter(ctx, ListFilter{})
		if err != nil {
			return nil, err
		}
		all, err := m.cfg.Client.Containers(ctx, filter)
		if err != nil {
			return nil, fmt.Errorf("stats: list: %w", err)
		}
		ctrs = all
	} else {
		for _, id := range idsOrNames {
			ctr, err := m.find(ctx, id)
			if err != nil {
				return nil, err
			}
			ctrs = append(ctrs, ctr)
		}
	}
	out := make([]Stats, 0, len(ctrs))
	for _, ctr := range ctrs {
		st, err := m.sample(ctx, ctr)
		if errdefs.IsNotFound(err) && len(idsOrNames) == 0 {
			continue // deleted while we listed
		}
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

func (m *Manager) sample(ctx context.Context, ctr client.Container) (Stats, error) {
	info, err := ctr.Info(ctx, client.WithoutRefreshedMetadata)
	if err != nil {
		return Stats{}, fmt.Errorf("stats %s: %w", ctr.ID(), err)
	}
	sb, err := m.describe(ctx, ctr, false)
	if err != nil {
		return Stats{}, err
	}
	st := Stats{ID: sb.ID, Name: sb.Name, State: sb.State, MemoryLimit: sb.Limits.MemoryBytes, At: time.Now()}
	if sb.State != string(client.Running) && sb.State != string(client.Paused) {
		return st, nil
	}
	task, err := ctr.Task(ctx, nil)
	if err != nil {
		return st, nil
	}
	u, err := usage(ctx, task, m.cgPath(sb.ID))
	if err != nil {
		m.log.Debug("stats", "sandbox", sb.ID, "err", err)
		return st, nil
	}
	if ns, _ := parseNetState(info.Labels); ns != nil && ns.Mode == network.ModeEgress {
		u.Network = true
		if rx, tx, err := netBytes(task.Pid()); err == nil {
			u.NetRxBytes, u.NetTxBytes = rx, tx
		} else {
			m.log.Debug("stats: net", "sandbox", sb.ID, "err", err)
		}
	}
	st.Usage = *u
	return st, nil
}

// RunEvents turns containerd's task events into boxd's until ctx ends:
// an OOM kill in a sandbox, and the exit of a sandbox's init (its
// processes' exits are the init's business, reported as exec events).
// It resubscribes after an error, as containerd may restart.
func (m *Manager) RunEvents(ctx context.Context) {
	ctx = namespaces.WithNamespace(ctx, m.cfg.Namespace)
	for ctx.Err() == nil {
		sctx, cancel := context.WithCancel(ctx)
		ch, errs := m.cfg.Client.Subscribe(sctx,
			fmt.Sprintf(`namespace==%s,topic=="/tasks/oom"`, m.cfg.Namespace),
			fmt.Sprintf(`namespace==%s,topic=="/tasks/exit"`, m.cfg.Namespace))
	loop:
		for {
			select {
			case env := <-ch:
				if env == nil || env.Event == nil {
					continue
				}
				v, err := typeurl.UnmarshalAny(env.Event)
				if err != nil {
					continue
				}
				m.taskEvent(v)
			case err := <-errs:
				if ctx.Err() == nil {
					m.log.Warn("containerd events: resubscribing", "err", err)
				}
				break loop
			case <-ctx.Done():
				break loop
			}
		}
		cancel()
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (m *Manager) taskEvent(v any) {
	switch e := v.(type) {
	case *apievents.TaskOOM:
		if m.inv.isVisible(e.ContainerID) {
			m.emit(events.OOM, e.ContainerID, nil)
		}
	case *apievents.TaskExit:
		// Only the init (exec id = container id) and only for a sandbox
		// clients see: a delete hides the sandbox before it kills it.
		if e.ID == e.ContainerID && m.inv.isVisible(e.ContainerID) {
			m.emit(events.Died, e.ContainerID, map[string]string{"exit_status": fmt.Sprint(e.ExitStatus), "reason": exitReason(e.ExitStatus)})
		}
	}
}
