//go:build linux

package main

// Process bookkeeping from /proc: which shims serve which containerd
// namespace, what runs under them, and how much memory (PSS) they hold.
// The cleanliness checks and the density scenario both use it.

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

type procInfo struct {
	pid, ppid int
	comm      string
	cmdline   []string
	zombie    bool
}

// listProcs reads every process once; processes that exit meanwhile are
// skipped.
func listProcs() map[int]procInfo {
	out := map[int]procInfo{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// "pid (comm) state ppid ...": comm may contain spaces and ')'.
		s := string(stat)
		l, r := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if l < 0 || r < l || r+2 >= len(s) {
			continue
		}
		f := strings.Fields(s[r+2:])
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		var args []string
		for _, a := range bytes.Split(bytes.TrimRight(cmd, "\x00"), []byte{0}) {
			args = append(args, string(a))
		}
		out[pid] = procInfo{pid: pid, ppid: ppid, comm: s[l+1 : r], cmdline: args, zombie: f[0] == "Z"}
	}
	return out
}

// shimsFor returns the live shims that the containerd at addr started for
// namespace ns (their command line is "containerd-shim-runc-v2 -namespace
// NS -id ID -address ADDR").
func shimsFor(procs map[int]procInfo, addr, ns string) []int {
	var out []int
	for pid, p := range procs {
		if p.zombie || !strings.HasPrefix(p.comm, "containerd-shim") {
			continue
		}
		if argAfter(p.cmdline, "-address") == addr && argAfter(p.cmdline, "-namespace") == ns {
			out = append(out, pid)
		}
	}
	sort.Ints(out)
	return out
}

func argAfter(args []string, flag string) string {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == flag {
			return args[i+1]
		}
	}
	return ""
}

// descendants returns every live descendant of the given pids. Container
// processes are children of their shim (a subreaper), so this is what runs
// in the sandboxes, including stray exec'd processes.
func descendants(procs map[int]procInfo, roots []int) []int {
	children := map[int][]int{}
	for pid, p := range procs {
		children[p.ppid] = append(children[p.ppid], pid)
	}
	var out []int
	queue := append([]int(nil), roots...)
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			if !procs[c].zombie {
				out = append(out, c)
			}
			queue = append(queue, c)
		}
	}
	sort.Ints(out)
	return out
}

// pssKiB returns a process's proportional set size: its private pages plus
// its share of pages it shares (a busybox or boxd-init text page mapped by
// 100 sandboxes counts 1/100 to each). 0 if the process is gone.
func pssKiB(pid int) int64 {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "Pss:" {
			v, _ := strconv.ParseInt(f[1], 10, 64)
			return v
		}
	}
	return 0
}

func sumPSS(pids []int) int64 {
	var t int64
	for _, p := range pids {
		t += pssKiB(p)
	}
	return t
}

// usedKiB is MemTotal - MemAvailable: memory the host cannot hand out
// without swapping, including kernel memory (page tables, cgroups, mounts,
// namespaces) that no process's PSS shows. Page cache that can be dropped
// is not counted.
func usedKiB() int64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	var total, avail int64
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "MemTotal:":
			total = v
		case "MemAvailable:":
			avail = v
		}
	}
	return total - avail
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(data)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// commOf returns the command name of pid, "" if it is gone.
func commOf(pid int) string {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

// killPid sends SIGKILL to pid if it is still the program named comm (pids
// are reused; never kill something that is not ours).
func killPid(pid int, comm string) {
	if pid > 1 && commOf(pid) == comm {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}
