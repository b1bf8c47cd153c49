//go:build linux

package runtime

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// adopt takes the command, its session and its children; it leaves the
// init, orphans (strays, below) and other sessions.
func TestAdopt(t *testing.T) {
	procs := testProcs()
	since := uint64(49)
	in := map[int]bool{}
	got := adopt(procs, 7, &since, in)
	slices.Sort(got)
	if want := []int{101, 102, 103}; !slices.Equal(got, want) {
		t.Errorf("adopted %v, want %v", got, want)
	}
	if since != 49 {
		t.Errorf("since = %d, want 49 (the command started later)", since)
	}
	// A later pass adds only the new children of what it has.
	got = adopt([]procInfo{procs[0], {pid: 120, ppid: 102, nsPid: 20, nsSid: 8, start: 60}}, 7, &since, in)
	if !slices.Equal(got, []int{120}) {
		t.Errorf("second pass adopted %v, want [120]", got)
	}
}

// pickStrays takes the init's orphans since the command started, leaders
// of a session or not, but no command boxd asked for (roots) nor one in
// such a command's session, nor older orphans.
func TestPickStrays(t *testing.T) {
	procs := testProcs()
	in := map[int]bool{101: true, 102: true, 103: true} // the command's, placed
	roots := map[int]bool{7: true, 12: true}            // commands being placed
	got := pickStrays(procs, 49, roots, in)
	slices.Sort(got)
	if want := []int{104, 109}; !slices.Equal(got, want) {
		t.Errorf("strays %v, want %v", got, want)
	}
	// With 13 no longer known (say its start was not reported yet,
	// which place waits for), nothing changes for older orphans.
	if got := pickStrays(procs, 60, roots, in); len(got) != 0 {
		t.Errorf("strays since 60: %v, want none", got)
	}
}

func testProcs() []procInfo {
	return []procInfo{
		{pid: 100, ppid: 90, nsPid: 1, nsSid: 1, start: 10},    // the init
		{pid: 101, ppid: 100, nsPid: 7, nsSid: 7, start: 50},   // the command
		{pid: 102, ppid: 101, nsPid: 8, nsSid: 8, start: 51},   // setsid child, parent alive
		{pid: 103, ppid: 100, nsPid: 9, nsSid: 7, start: 51},   // orphan in the session
		{pid: 104, ppid: 100, nsPid: 10, nsSid: 3, start: 52},  // daemon: orphan, no leader
		{pid: 105, ppid: 104, nsPid: 11, nsSid: 3, start: 52},  // its child (follows it)
		{pid: 106, ppid: 100, nsPid: 12, nsSid: 12, start: 52}, // another command being placed
		{pid: 107, ppid: 100, nsPid: 13, nsSid: 4, start: 20},  // an older orphan
		{pid: 108, ppid: 100, nsPid: 14, nsSid: 12, start: 53}, // an orphan in that command's session
		{pid: 109, ppid: 100, nsPid: 15, nsSid: 15, start: 53}, // setsid and orphaned: a stray
	}
}

// reuse keeps empty command cgroups, at most maxFreeGroups, and never
// one that holds a process; asked hands them out again.
func TestReuseEmptyGroups(t *testing.T) {
	sp := newSpawning()
	dirs := make([]string, maxFreeGroups+2)
	for i := range dirs {
		dirs[i] = t.TempDir()
		events := "populated 0\nfrozen 0\n"
		if i == 0 {
			events = "populated 1\nfrozen 0\n"
		}
		if err := os.WriteFile(filepath.Join(dirs[i], "cgroup.events"), []byte(events), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if sp.reuse(dirs[0]) {
		t.Error("kept a cgroup that holds a process")
	}
	kept := 0
	for _, d := range dirs[1:] {
		if sp.reuse(d) {
			kept++
		}
	}
	if kept != maxFreeGroups {
		t.Errorf("kept %d empty cgroups, want %d", kept, maxFreeGroups)
	}
	if sp.reuse(filepath.Join(t.TempDir(), "gone")) {
		t.Error("kept a cgroup that does not exist")
	}
	if d := sp.ask(&cmdGroup{}); d != dirs[maxFreeGroups] || len(sp.asking) != 1 {
		t.Errorf("ask handed out %q (asking %d), want the last one kept, %q", d, len(sp.asking), dirs[maxFreeGroups])
	}
}
