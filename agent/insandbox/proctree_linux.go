//go:build linux

package insandbox

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"time"
)

// procStat holds the fields of /proc/PID/stat that tree killing needs.
type procStat struct {
	pid, ppid, pgrp, session int
	state                    byte
	start                    uint64 // clock ticks after boot
}

// readProcStat parses /proc/PID/stat. The command name (field 2) may contain
// spaces and parentheses, so fields are counted from the last ')'.
func readProcStat(pid int) (procStat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, false
	}
	// After ") ": state ppid pgrp session ...
	f := bytes.Fields(b[i+1:])
	if len(f) < 4 || len(f[0]) != 1 {
		return procStat{}, false
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	pgrp, err2 := strconv.Atoi(string(f[2]))
	sid, err3 := strconv.Atoi(string(f[3]))
	if err1 != nil || err2 != nil || err3 != nil {
		return procStat{}, false
	}
	st := procStat{pid: pid, ppid: ppid, pgrp: pgrp, session: sid, state: f[0][0]}
	if len(f) > 19 { // starttime is field 22 of the file
		st.start, _ = strconv.ParseUint(string(f[19]), 10, 64)
	}
	return st, true
}

// eachProc calls fn for every live (non-zombie) process in our pid namespace.
func eachProc(fn func(procStat)) {
	d, err := os.Open("/proc")
	if err != nil {
		return
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil || pid <= 0 {
			continue
		}
		st, ok := readProcStat(pid)
		if !ok || st.state == 'Z' || st.state == 'X' {
			continue
		}
		fn(st)
	}
}

// killSession SIGKILLs the process group sid and every process whose session
// is sid. A member can fork while we scan, so rescan until a pass finds no
// member we have not already signalled: once all members have a pending
// SIGKILL, none of them can complete another fork.
func killSession(sid int) {
	if sid <= 1 {
		return
	}
	syscall.Kill(-sid, syscall.SIGKILL)
	seen := map[int]bool{}
	for range 32 {
		fresh := false
		eachProc(func(st procStat) {
			if st.session == sid && !seen[st.pid] {
				seen[st.pid] = true
				fresh = true
				syscall.Kill(st.pid, syscall.SIGKILL)
			}
		})
		if !fresh {
			return
		}
	}
}

// killDescendants SIGKILLs our children until none are left. Because this
// process is a subreaper, grandchildren orphaned by the kills are reparented
// to us and caught by the next pass.
func killDescendants() {
	self := os.Getpid()
	for range 64 {
		found := false
		eachProc(func(st procStat) {
			if st.ppid == self {
				found = true
				syscall.Kill(st.pid, syscall.SIGKILL)
			}
		})
		if !found {
			return
		}
		// Give the signalled processes a moment to die before rescanning.
		time.Sleep(time.Millisecond)
	}
}
