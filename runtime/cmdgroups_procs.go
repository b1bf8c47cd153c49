//go:build linux

// Room: resources. Cgroups of background processes and sessions: each
// runs in a cgroup of its own, as an exec's command does, so that killing
// a process or stopping a session command takes what it set loose.

package runtime

import (
	"context"
	"os"
	"path/filepath"
	"syscall"

	"github.com/boxd-dev/boxd/agent/host"
	"github.com/boxd-dev/boxd/agent/wire"
)

// Prefixes of the cgroups of background processes (proc-ID, the id the
// init gave it) and sessions (sess-NAME). kill --all leaves them alone.
const (
	procGroupPrefix    = "proc-"
	sessionGroupPrefix = "sess-"
)

// spawnGroup is a cgroup for a process the init is about to start for
// sandbox id (nil under gVisor or without a cgroup v2 hierarchy). Its
// name is known once the init answered (named).
func (m *Manager) spawnGroup(id string) *cmdGroup {
	if m.agentLinkFor(id).gvisor.Load() {
		return nil
	}
	g := m.newCmdGroup(id)
	if g != nil {
		g.keep = true
	}
	return g
}

// started names g's cgroup and places nsPid there, or forgets g when the
// start failed.
func (g *cmdGroup) startedAs(name string, nsPid int, err error) {
	if g == nil {
		return
	}
	if err != nil || nsPid <= 0 {
		g.finish(true)
		return
	}
	g.sp.reuse(g.dir) // an empty command cgroup it was handed
	g.dir = filepath.Join(g.parent, name)
	g.start(nsPid)
}

// procGroupDir is where background process pid of sandbox id runs.
func (m *Manager) procGroupDir(id, name string) string {
	return filepath.Join(m.cmdcg.unifiedRoot(), m.cgPath(id), name)
}

// killGroup kills every process in sandbox id's cgroup name (a process's,
// a session's) and removes it.
func (m *Manager) killGroup(id, name string) {
	if m.cmdcg.unifiedRoot() == "" || m.agentLinkFor(id).gvisor.Load() {
		return
	}
	m.awaitPlaced(id)
	dir := m.procGroupDir(id, name)
	if _, err := os.Stat(dir); err != nil {
		return
	}
	if err := killCgroup(dir); err != nil {
		m.log.Warn("kill a process's cgroup", "sandbox", id, "cgroup", dir, "error", err)
	}
	m.leaveCmdGroup(id, dir)
}

// awaitPlaced waits until sandbox id has no process being placed, so a
// kill right after a start finds the whole tree in its cgroup.
func (m *Manager) awaitPlaced(id string) {
	sp := m.cmdcg.spawning(id)
	sp.mu.Lock()
	var waits []chan struct{}
	for g := range sp.placing {
		waits = append(waits, g.done)
	}
	sp.mu.Unlock()
	for _, w := range waits {
		<-w
	}
}

// isKill reports whether sig is SIGKILL.
func isKill(sig string) bool {
	s, err := wire.ParseSignal(sig)
	return err == nil && s == syscall.SIGKILL
}

// afterSessionExec ends what a session command left when it was stopped:
// at a timeout, every process in the session's cgroup that started since
// the command was sent (the shell and earlier leftovers stay); when the
// shell was replaced or ended, all of it, and the new shell goes in.
func (m *Manager) afterSessionExec(ctx context.Context, c *host.Client, id, name string, sent uint64, res wire.SessionResult) {
	if m.cmdcg.unifiedRoot() == "" || m.agentLinkFor(id).gvisor.Load() {
		return
	}
	dir := m.procGroupDir(id, sessionGroupPrefix+name)
	switch {
	case res.SessionEnded:
		m.killGroup(id, sessionGroupPrefix+name)
	case res.Restarted:
		_ = killCgroup(dir)
		m.rehomeShell(ctx, c, id, name, dir)
	case res.TimedOut:
		m.awaitPlaced(id)
		killSince(dir, sent, sessionShell(ctx, c, name))
	}
}

// sessionShell is the pid in the sandbox of session name's shell, 0 if
// the init does not say. A start time alone cannot spare the shell: it
// counts in clock ticks (10 ms), and a session made and given a command
// within one tick has a shell no older than the command.
func sessionShell(ctx context.Context, c *host.Client, name string) int {
	infos, err := c.ListSessions(ctx)
	if err != nil {
		return 0
	}
	for _, s := range infos {
		if s.Name == name {
			return s.PID
		}
	}
	return 0
}

// rehomeShell moves session name's new shell (the init started it in the
// sandbox's own cgroup, where a command being placed meanwhile may have
// taken it for a stray) into the session's cgroup.
func (m *Manager) rehomeShell(ctx context.Context, c *host.Client, id, name, dir string) {
	infos, err := c.ListSessions(ctx)
	if err != nil {
		return
	}
	for _, s := range infos {
		if s.Name != name {
			continue
		}
		m.awaitPlaced(id)
		dirs, _ := m.cmdGroupDirs(id)
		for _, from := range append(dirs, filepath.Join(m.cmdcg.unifiedRoot(), m.cgPath(id))) {
			for _, pid := range cgroupPids(from) {
				if p, ok := readProcInfo(pid); ok && p.nsPid == s.PID {
					_ = mkCgroup(dir)
					_ = moveTo(dir, pid)
				}
			}
		}
	}
}
