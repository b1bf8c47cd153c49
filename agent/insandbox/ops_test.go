//go:build linux

package insandbox

import (
	"slices"
	"testing"

	"github.com/boxd-dev/boxd/agent/wire"
)

// The op table serves every op the wire names and no other.
func TestOpTableMatchesWire(t *testing.T) {
	var served []string
	for name, h := range ops {
		if h == nil {
			t.Errorf("op %q has no handler", name)
		}
		served = append(served, name)
	}
	want := slices.Clone(wire.Ops)
	slices.Sort(served)
	slices.Sort(want)
	if !slices.Equal(served, want) {
		t.Errorf("op table serves %v, wire names %v", served, want)
	}
}
