// Room: network. The egress deny log: refusals as events, and each
// sandbox's log for its owner and admins.

package runtime

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"

	"github.com/boxd-dev/boxd/internal/events"
	"github.com/boxd-dev/boxd/network"
)

// watchDenials counts each closed deny-log window's refusals and emits an
// egress_denied event per record: the sandbox's owner and admins see them.
func (m *Manager) watchDenials() {
	if m.cfg.Network == nil {
		return
	}
	m.cfg.Network.OnDeny(func(id string, recs []network.DenyRecord) {
		for _, r := range recs {
			m.counters.addDenied(r.Reason, r.Count)
			if m.cfg.Events == nil {
				continue
			}
			m.emit(events.EgressDenied, id, map[string]string{
				"dest": r.Dest, "port": strconv.Itoa(int(r.Port)), "proto": r.Proto, "reason": r.Reason,
				"count": strconv.FormatUint(r.Count, 10),
				"first": r.First.UTC().Format(time.RFC3339Nano), "last": r.Last.UTC().Format(time.RFC3339Nano),
			})
		}
	})
}

// NetworkLog is the deny log of an egress sandbox the caller may use
// (another user's is not found), oldest first.
func (m *Manager) NetworkLog(ctx context.Context, idOrName string) ([]network.DenyRecord, error) {
	ctx = namespaces.WithNamespace(ctx, m.cfg.Namespace)
	ctr, err := m.find(ctx, idOrName)
	if err != nil {
		return nil, err
	}
	labels, err := ctr.Labels(ctx)
	if err != nil {
		return nil, err
	}
	st, err := parseNetState(labels)
	if err != nil {
		return nil, err
	}
	if st == nil || st.Mode != network.ModeEgress {
		return nil, fmt.Errorf("sandbox %s has network mode none; only an egress sandbox has a deny log: %w", ctr.ID(), errdefs.ErrFailedPrecondition)
	}
	if m.cfg.Network == nil {
		return nil, fmt.Errorf("network egress is not available in this boxd (%s): %w", m.cfg.NetworkErr, errdefs.ErrFailedPrecondition)
	}
	return m.cfg.Network.DenyLog(ctr.ID()), nil
}
