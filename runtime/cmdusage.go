//go:build linux

// Room: resources. What a command used, read from its command cgroup
// where cgroup v2 accounts it (the memory controller enabled for the
// sandbox's children); elsewhere a result keeps the init's getrusage.

package runtime

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// cgroupUsage is a command cgroup's use: every process that was in it,
// escaped ones included, while it was.
type cgroupUsage struct {
	user, system         time.Duration
	peak, rbytes, wbytes int64
}

// readCgroupUsage reads cpu.stat, memory.peak and io.stat in dir. It
// reports false where the cgroup has no memory accounting.
func readCgroupUsage(dir string) (cgroupUsage, bool) {
	var u cgroupUsage
	peak, err := os.ReadFile(filepath.Join(dir, "memory.peak"))
	if err != nil {
		return u, false
	}
	u.peak, err = strconv.ParseInt(string(bytes.TrimSpace(peak)), 10, 64)
	if err != nil {
		return u, false
	}
	if b, err := os.ReadFile(filepath.Join(dir, "cpu.stat")); err == nil {
		u.user, u.system = parseCPUStat(b)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "io.stat")); err == nil {
		r, w := parseIOStat(string(b)) // usage.go's
		u.rbytes, u.wbytes = int64(min(r, 1<<62)), int64(min(w, 1<<62))
	}
	return u, true
}

// parseCPUStat reads user_usec and system_usec of a cgroup v2 cpu.stat.
func parseCPUStat(b []byte) (user, system time.Duration) {
	for _, line := range strings.Split(string(b), "\n") {
		key, val, _ := strings.Cut(line, " ")
		n, err := strconv.ParseInt(strings.TrimSpace(val), 10, 64)
		if err != nil {
			continue
		}
		switch key {
		case "user_usec":
			user = time.Duration(n) * time.Microsecond
		case "system_usec":
			system = time.Duration(n) * time.Microsecond
		}
	}
	return user, system
}

// accounted reports whether the command cgroups of the sandbox whose
// cgroup is parent account memory: the memory controller is enabled for
// its children. Looked at once per sandbox.
func (s *spawning) accounted(parent string) bool {
	s.acctOnce.Do(func() {
		b, _ := os.ReadFile(filepath.Join(parent, "cgroup.subtree_control"))
		s.acct = strings.Contains(string(b), "memory")
	})
	return s.acct
}

// useCgroupUsage puts the command cgroup's numbers into res where the
// cgroup accounts memory and the command was placed before it ended
// (what it used before its placing is not in the cgroup).
func (g *cmdGroup) useCgroupUsage(res *ExecResult) {
	if g == nil || !g.started || !g.sp.accounted(g.parent) {
		return
	}
	select {
	case <-g.done:
	default:
		return // a short command, not placed yet: the init's numbers
	}
	if u, ok := readCgroupUsage(g.dir); ok && g.dir != "" {
		res.UserCPU, res.SystemCPU, res.MaxRSS = u.user, u.system, u.peak
		res.ReadBytes, res.WriteBytes = u.rbytes, u.wbytes
	}
}
