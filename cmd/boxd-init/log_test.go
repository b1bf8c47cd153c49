//go:build linux

package main

import (
	"bytes"
	"strings"
	"testing"
)

// The init's log stops at its budget, whatever is logged, and says so once.
func TestBudgetLogStops(t *testing.T) {
	var buf bytes.Buffer
	l := newBudgetLog(&buf, 1000)
	for i := 0; i < 10000; i++ {
		l.logf("stat failed: %s", strings.Repeat("x", 50))
	}
	if buf.Len() > 1000+200 {
		t.Fatalf("log grew to %d bytes with a budget of 1000", buf.Len())
	}
	if n := strings.Count(buf.String(), "budget"); n != 1 {
		t.Fatalf("the cut-off line appears %d times, want once:\n%s", n, buf.String())
	}
	if !strings.Contains(buf.String(), "stat failed") {
		t.Fatalf("lines within the budget are missing:\n%s", buf.String())
	}
}
