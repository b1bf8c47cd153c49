// Room: describe. Counters since start that the metrics endpoint reads:
// where creates came from, and egress refusals by reason.

package runtime

import (
	"maps"
	"sync"
	"sync/atomic"
)

// counters are bumped on the paths they count; Counts copies them.
type counters struct {
	poolHandouts atomic.Uint64
	coldCreates  atomic.Uint64
	mu           sync.Mutex
	denied       map[string]uint64 // refusals by deny-log reason
}

// Counts are counters since boxd started.
type Counts struct {
	// PoolHandouts and ColdCreates are successful creates by source.
	PoolHandouts, ColdCreates uint64
	// EgressDenied counts refused connections and names by reason
	// (network.DenyRecord.Reason), including those a deny-log window had
	// no room to record one by one.
	EgressDenied map[string]uint64
}

// Counts returns a copy of the counters.
func (m *Manager) Counts() Counts {
	c := &m.counters
	c.mu.Lock()
	denied := maps.Clone(c.denied)
	c.mu.Unlock()
	if denied == nil {
		denied = map[string]uint64{}
	}
	return Counts{PoolHandouts: c.poolHandouts.Load(), ColdCreates: c.coldCreates.Load(), EgressDenied: denied}
}

func (c *counters) addDenied(reason string, n uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.denied == nil {
		c.denied = map[string]uint64{}
	}
	c.denied[reason] += n
}
