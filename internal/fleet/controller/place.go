package controller

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	fleetv1 "github.com/boxd-dev/boxd/internal/fleet/api/v1alpha1"
)

// Placement samples K of the nodes that report and takes the one with
// the most free memory, counting what this controller placed there since
// the node last reported (E2B's best of K: a burst spreads without every
// create asking every node).

// assumedBytes is what a placement counts against a node's free memory
// until the node reports again.
const assumedBytes = 256 << 20

type placer struct {
	mu     sync.Mutex
	recent map[string][]time.Time // node: placements not yet in a report
}

func newPlacer() *placer { return &placer{recent: map[string][]time.Time{}} }

func (p *placer) placed(node string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.recent[node] = append(p.recent[node], time.Now())
}

// pending counts placements on n newer than its last report.
func (p *placer) pending(n *fleetv1.BoxdNode) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var keep []time.Time
	for _, t := range p.recent[n.Name] {
		if t.After(n.Status.HeartbeatTime.Time) {
			keep = append(keep, t)
		}
	}
	p.recent[n.Name] = keep
	return int64(len(keep))
}

func (p *placer) score(n *fleetv1.BoxdNode) int64 {
	return n.Status.FreeMemoryBytes - p.pending(n)*assumedBytes
}

// place picks a node for a sandbox.
func (r *SandboxReconciler) place(ctx context.Context) (string, error) {
	var list fleetv1.BoxdNodeList
	if err := r.List(ctx, &list); err != nil {
		return "", err
	}
	var live []*fleetv1.BoxdNode
	for i := range list.Items {
		if r.fresh(&list.Items[i]) {
			live = append(live, &list.Items[i])
		}
	}
	if len(live) == 0 {
		return "", errNoNode
	}
	rand.Shuffle(len(live), func(i, j int) { live[i], live[j] = live[j], live[i] })
	best := live[0]
	for _, n := range live[1:min(r.Opts.K, len(live))] {
		if r.placer.score(n) > r.placer.score(best) {
			best = n
		}
	}
	r.placer.placed(best.Name)
	return best.Name, nil
}
