//go:build linux

// Room: resources. OOM kill counts of a sandbox's cgroup.

package runtime

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/containerd/cgroups/v3"
)

// oomKills reads how many processes the kernel's OOM killer has killed in
// a sandbox's cgroup: oom_kill in memory.events (v2) or memory.oom_control
// (v1). It reads the host's cgroup file, which nothing in the sandbox can
// write; ok is false if it cannot be read.
//
// Every exec reads it before it starts, so the file stays open per sandbox
// and is re-read in place: opening a cgroup file costs about 30 µs here,
// a pread 4 µs. A sandbox's cgroup is made anew when its task is (a
// restart, stop and start); the old one's file then fails with ENODEV,
// and any failure opens the file again once.
func (m *Manager) oomKills(id string) (n uint64, ok bool) {
	var buf [512]byte
	for attempt := 0; attempt < 2 && m.inv.known(id); attempt++ {
		f, err := m.oomFiles.open(id, func() string { return m.oomFile(id) }, attempt > 0)
		if err != nil {
			return 0, false
		}
		if !m.inv.known(id) {
			// Deleted meanwhile: its delete may have closed the files
			// it knew of before this one was opened.
			m.oomFiles.forget(id)
			break
		}
		// ReadAt, not a raw pread of Fd(): another exec may close f
		// meanwhile (its read failed), and ReadAt then fails cleanly
		// where a raw descriptor could already name another file.
		k, err := f.ReadAt(buf[:], 0)
		if k == 0 || (err != nil && err != io.EOF) {
			m.oomFiles.drop(id, f)
			continue
		}
		return parseOOMKills(buf[:k])
	}
	// Not one this boxd counts (another boxd's, or being deleted): read
	// it without keeping it open.
	b, err := os.ReadFile(m.oomFile(id))
	if err != nil {
		return 0, false
	}
	return parseOOMKills(b)
}

func (m *Manager) oomFile(id string) string {
	rel := filepath.Join("/", m.cfg.Namespace, id)
	if cgroups.Mode() != cgroups.Unified {
		return filepath.Join("/sys/fs/cgroup/memory", rel, "memory.oom_control")
	}
	return filepath.Join(unifiedMountpoint, rel, "memory.events")
}

// parseOOMKills finds the oom_kill counter in memory.events or
// memory.oom_control.
func parseOOMKills(b []byte) (uint64, bool) {
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

// openFiles keeps one open file per sandbox id.
type openFiles struct {
	mu    sync.Mutex
	files map[string]*os.File
}

// open returns id's file, opening path() if there is none or fresh is set.
func (o *openFiles) open(id string, path func() string, fresh bool) (*os.File, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if f := o.files[id]; f != nil && !fresh {
		return f, nil
	}
	f, err := os.Open(path())
	if err != nil {
		return nil, err
	}
	if old := o.files[id]; old != nil {
		old.Close()
	}
	if o.files == nil {
		o.files = make(map[string]*os.File)
	}
	o.files[id] = f
	return f, nil
}

// drop closes f if it is still id's file.
func (o *openFiles) drop(id string, f *os.File) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.files[id] == f {
		delete(o.files, id)
		f.Close()
	}
}

// forget closes id's file, when the sandbox is deleted.
func (o *openFiles) forget(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if f := o.files[id]; f != nil {
		delete(o.files, id)
		f.Close()
	}
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
