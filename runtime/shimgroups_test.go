package runtime

import (
	"context"
	"testing"
)

// Groups fill up to their size, the fullest first; a group that empties is
// retired and never handed out again, so no create can join a shim that is
// exiting.
func TestShimGroups(t *testing.T) {
	g := newShimGroups(3)
	g.loaded = true // nothing recorded: no containerd needed
	ctx := context.Background()
	take := func() string {
		t.Helper()
		name, err := g.take(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		return name
	}
	a1, a2, a3 := take(), take(), take()
	if a1 != a2 || a2 != a3 {
		t.Fatalf("first three in %q %q %q, want one group", a1, a2, a3)
	}
	b1 := take()
	if b1 == a1 {
		t.Fatalf("a fourth member joined the full group %q", a1)
	}
	// A place freed in the full group is taken before the emptier one.
	g.give(a1)
	if got := take(); got != a1 {
		t.Errorf("with %q at 2/3 and %q at 1/3, a create joined %q", a1, b1, got)
	}
	// b empties: retired, and the next group is new.
	g.give(b1)
	if _, ok := g.sizes()[b1]; ok {
		t.Fatalf("emptied group %q still listed: %v", b1, g.sizes())
	}
	c1 := take() // a is full again: a new group
	if c1 == a1 || c1 == b1 {
		t.Errorf("new member joined %q; want a fresh group (a %q full, b %q retired)", c1, a1, b1)
	}
	for range 3 {
		g.give(a1)
	}
	if got := take(); got == a1 || got != c1 {
		t.Errorf("after a emptied, a create joined %q; want c %q", got, c1)
	}
	g.give("") // a sandbox with its own shim
	if s := g.sizes(); len(s) != 1 || s[c1] != 2 {
		t.Errorf("sizes %v, want only %q with 2", s, c1)
	}
}
