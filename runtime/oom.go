//go:build linux

package runtime

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"

	"github.com/containerd/cgroups/v3"
)

// oomKills reads how many processes the kernel's OOM killer has killed in
// a sandbox's cgroup: oom_kill in memory.events (v2) or memory.oom_control
// (v1). It reads the host's cgroup file, which nothing in the sandbox can
// write; ok is false if it cannot be read.
func (m *Manager) oomKills(id string) (n uint64, ok bool) {
	rel := filepath.Join("/", m.cfg.Namespace, id)
	file := filepath.Join(unifiedMountpoint, rel, "memory.events")
	if cgroups.Mode() != cgroups.Unified {
		file = filepath.Join("/sys/fs/cgroup/memory", rel, "memory.oom_control")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, _ := bytes.Cut(sc.Bytes(), []byte(" "))
		if string(k) == "oom_kill" {
			n, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// markOOM sets res.OOMKilled when the command died of SIGKILL (not a
// timeout's) and the sandbox's OOM kill counter went up while it ran. Both
// are needed: a command can die of SIGKILL from a kill -9, and the OOM
// killer can pick another process of the sandbox.
func (m *Manager) markOOM(id string, before uint64, beforeOK bool, res *ExecResult) {
	res.OOMKilled = false // the init's word does not count
	if !beforeOK || res.Signal != "SIGKILL" || res.TimedOut {
		return
	}
	if after, ok := m.oomKills(id); ok && after > before {
		res.OOMKilled = true
	}
}
