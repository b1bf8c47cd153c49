// Room: describe. Counters since start that the metrics endpoint reads:
// egress refusals by reason. (The warm pools count their own creates.)

package runtime

import (
	"maps"
	"sync"
)

// counters are bumped on the paths they count; Counts copies them.
type counters struct {
	mu     sync.Mutex
	denied map[string]uint64 // refusals by deny-log reason
}

// Counts are counters since boxd started.
type Counts struct {
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
	return Counts{EgressDenied: denied}
}

func (c *counters) addDenied(reason string, n uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.denied == nil {
		c.denied = map[string]uint64{}
	}
	c.denied[reason] += n
}
