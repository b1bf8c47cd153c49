//go:build linux

package runtime

import (
	"slices"
	"testing"
)

// adopt takes the command, its session, its children and the init's
// orphans since it started that lead no session; it leaves the init, the
// init's own session leaders, older orphans and other sessions.
func TestAdopt(t *testing.T) {
	procs := []procInfo{
		{pid: 100, ppid: 90, nsPid: 1, nsSid: 1, start: 10},    // the init
		{pid: 101, ppid: 100, nsPid: 7, nsSid: 7, start: 50},   // the command
		{pid: 102, ppid: 101, nsPid: 8, nsSid: 8, start: 51},   // setsid child, parent alive
		{pid: 103, ppid: 100, nsPid: 9, nsSid: 7, start: 51},   // orphan in the session
		{pid: 104, ppid: 100, nsPid: 10, nsSid: 3, start: 52},  // daemon: orphan, no leader
		{pid: 105, ppid: 104, nsPid: 11, nsSid: 3, start: 52},  // its child
		{pid: 106, ppid: 100, nsPid: 12, nsSid: 12, start: 52}, // a leader: the init's own?
		{pid: 107, ppid: 100, nsPid: 13, nsSid: 4, start: 20},  // an older orphan
		{pid: 108, ppid: 106, nsPid: 14, nsSid: 12, start: 53}, // another command's child
	}
	since := uint64(49)
	in := map[int]bool{}
	got := adopt(procs, 7, &since, in)
	slices.Sort(got)
	if want := []int{101, 102, 103, 104, 105}; !slices.Equal(got, want) {
		t.Errorf("adopted %v, want %v", got, want)
	}
	if since != 49 {
		t.Errorf("since = %d, want 49 (the command started later)", since)
	}
	// A later pass adds only the new children of what it has.
	got = adopt([]procInfo{procs[0], {pid: 120, ppid: 105, nsPid: 20, nsSid: 20, start: 60}}, 7, &since, in)
	if !slices.Equal(got, []int{120}) {
		t.Errorf("second pass adopted %v, want [120]", got)
	}
}
