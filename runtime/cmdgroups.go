//go:build linux

// Room: resources. Per-command cgroups: every exec's command runs in a
// cgroup of its own under its sandbox's, which is how its whole tree is
// found and killed, whatever it did to leave its session.

package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/containerd/cgroups/v3"
	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"
)

// cmdGroups is the manager's state for per-command cgroups. They live in
// the unified (v2) hierarchy, which every host boxd runs on has: the whole
// tree on a pure v2 host, the cgroup2 mount beside the v1 controllers on a
// hybrid one (there it holds no controllers, only membership, which is
// all killing needs). boxd creates and fills them from the host side; the
// sandbox sees its cgroupfs read-only and cannot move itself out.
type cmdGroups struct {
	once sync.Once
	root string // the unified hierarchy's mountpoint; "" when there is none
	seq  atomic.Uint64
	// left holds, per sandbox id, the command cgroups a command left
	// processes in (deliberate leftovers: `cmd &`, a server): removed once
	// empty, at the next exec's end.
	left sync.Map // id -> *leftovers
}

type leftovers struct {
	mu   sync.Mutex
	dirs map[string]bool
}

// cmdGroupPrefix names the command cgroups in a sandbox's cgroup.
const cmdGroupPrefix = "cmd-"

// unifiedRoot is where the unified hierarchy is mounted, or "".
func (g *cmdGroups) unifiedRoot() string {
	g.once.Do(func() {
		if cgroups.Mode() == cgroups.Unified {
			g.root = unifiedMountpoint
			return
		}
		hybrid := filepath.Join(unifiedMountpoint, "unified")
		if _, err := os.Stat(filepath.Join(hybrid, "cgroup.procs")); err == nil {
			g.root = hybrid
		}
	})
	return g.root
}

// cmdGroup is one command's cgroup.
type cmdGroup struct {
	m      *Manager
	id     string // the sandbox's
	parent string // the sandbox's cgroup directory
	dir    string
	placed bool
	sent   uint64 // bootTicks when the exec was asked for
	// started is set when the init reported the command (start ran);
	// done is closed once start's placing is over.
	started bool
	done    chan struct{}
}

// newCmdGroup names a cgroup for a command of sandbox id, or returns nil
// where there is no unified hierarchy to put it in. The cgroup is made
// and filled off the exec's path (start), because moving a process takes
// the kernel's cgroup-wide lock for writing: without the cgroup2 mount
// option favordynmods that waits for an RCU grace period, a third of a
// millisecond here, which the command's output need not wait for.
func (m *Manager) newCmdGroup(id string) *cmdGroup {
	root := m.cmdcg.unifiedRoot()
	if root == "" {
		return nil
	}
	parent := filepath.Join(root, m.cgPath(id))
	dir := filepath.Join(parent, cmdGroupPrefix+strconv.FormatUint(m.cmdcg.seq.Add(1), 10))
	return &cmdGroup{m: m, id: id, parent: parent, dir: dir, sent: bootTicks(), done: make(chan struct{})}
}

// start makes the cgroup and places the command in it, in the background:
// the init's started frame named it (nsPid in the sandbox).
func (g *cmdGroup) start(nsPid int) {
	g.started = true
	go func() {
		defer close(g.done)
		if err := os.Mkdir(g.dir, 0o755); err != nil {
			g.dir = "" // no sandbox cgroup here (a build's, say): nothing to do
			return
		}
		g.place(nsPid)
	}()
}

// procInfo is what placing needs of a process in the sandbox's cgroup:
// its parent (host pids), its pid and session in the sandbox's pid
// namespace, and when it started (clock ticks since boot).
type procInfo struct {
	pid, ppid, nsPid, nsSid int
	start                   uint64
}

// place moves the command, whose pid in the sandbox is nsPid, into the
// cgroup. The init reports the pid right after the exec succeeded, so
// the command has run for a moment already, and what it started meanwhile
// is still in the sandbox's cgroup. That is moved too: its session (the
// init starts every command as a session leader), the children of what is
// moved, and the processes the init adopted (orphans) that started no
// earlier than the command and lead no session, which is how a daemon's
// double fork looks. Pass after pass until one moves nothing:
// whatever starts later is born in the command's cgroup.
func (g *cmdGroup) place(nsPid int) {
	since := g.sent // the command started no earlier than this
	in := map[int]bool{}
	for range 4 {
		fresh := adopt(g.rootProcs(), nsPid, &since, in)
		moved := false
		for _, pid := range fresh {
			if g.move(pid) == nil {
				moved = true
			}
		}
		if !moved {
			return
		}
		g.placed = true
	}
}

// adopt picks the command's processes among procs into in: the command,
// its session, orphans the init adopted since the command started, and
// the children of all of these (in holds those of earlier passes). since
// is lowered to the command's own start. It returns the ones added.
func adopt(procs []procInfo, nsPid int, since *uint64, in map[int]bool) []int {
	init := 0
	for _, p := range procs {
		if p.nsPid == 1 {
			init = p.pid
		}
		if p.nsPid == nsPid && p.start < *since {
			*since = p.start
		}
	}
	var fresh []int
	for grew := true; grew; {
		grew = false
		for _, p := range procs {
			if in[p.pid] || p.pid == init {
				continue
			}
			// An orphan that leads its own session looks like what the
			// init starts itself (every command, process and session
			// shell): only the others are taken.
			orphan := init != 0 && p.ppid == init && p.start >= *since && p.nsSid != p.nsPid
			if p.nsPid == nsPid || p.nsSid == nsPid || in[p.ppid] || orphan {
				in[p.pid], grew = true, true
				fresh = append(fresh, p.pid)
			}
		}
	}
	return fresh
}

// bootTicks is now in the clock ticks /proc/PID/stat counts start times
// in (USER_HZ, 100 a second on Linux), rounded down.
func bootTicks() uint64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts) != nil {
		return 0
	}
	return uint64(ts.Nano()) / uint64(time.Second/100)
}

func (g *cmdGroup) move(pid int) error {
	return os.WriteFile(filepath.Join(g.dir, "cgroup.procs"), strconv.AppendInt(nil, int64(pid), 10), 0o644)
}

// rootProcs lists the processes in the sandbox's own cgroup (not in a
// command's): its init, and commands not placed yet.
func (g *cmdGroup) rootProcs() []procInfo {
	b, err := os.ReadFile(filepath.Join(g.parent, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var out []procInfo
	for _, f := range bytes.Fields(b) {
		pid, err := strconv.Atoi(string(f))
		if err != nil {
			continue
		}
		if p, ok := readProcInfo(pid); ok {
			out = append(out, p)
		}
	}
	return out
}

// readProcInfo reads /proc/PID/status and stat for procInfo. NSpid and
// NSsid list the ids from the host's pid namespace inwards: the last is
// the sandbox's.
func readProcInfo(pid int) (procInfo, bool) {
	dir := "/proc/" + strconv.Itoa(pid)
	b, err := os.ReadFile(dir + "/status")
	if err != nil {
		return procInfo{}, false
	}
	p := procInfo{pid: pid}
	for _, line := range strings.Split(string(b), "\n") {
		key, val, ok := strings.Cut(line, ":")
		fs := strings.Fields(val)
		if !ok || len(fs) == 0 {
			continue
		}
		n, _ := strconv.Atoi(fs[len(fs)-1])
		switch key {
		case "PPid":
			p.ppid = n
		case "NSpid":
			p.nsPid = n
		case "NSsid":
			p.nsSid = n
		}
	}
	st, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return procInfo{}, false
	}
	// Fields after the command name, which may hold anything up to its
	// last ')': state is field 3, starttime field 22.
	if i := bytes.LastIndexByte(st, ')'); i >= 0 {
		if fs := bytes.Fields(st[i+1:]); len(fs) > 19 {
			p.start, _ = strconv.ParseUint(string(fs[19]), 10, 64)
		}
	}
	return p, p.nsPid != 0
}

// finish ends the command's cgroup when its exec ends. With kill (a
// timeout, a closed stream) every process in it is killed and the cgroup
// removed before it returns. Otherwise, in the background, it is removed
// if empty, and kept while the command's leftovers run, to be removed once
// they are gone.
func (g *cmdGroup) finish(kill bool) {
	if g == nil || !g.started {
		return
	}
	end := func() {
		<-g.done
		if g.dir == "" {
			return
		}
		if kill && g.placed {
			if err := killCgroup(g.dir); err != nil {
				g.m.log.Warn("kill a command's cgroup", "sandbox", g.id, "cgroup", g.dir, "error", err)
			}
		}
		if err := os.Remove(g.dir); err != nil && errors.Is(err, syscall.EBUSY) {
			l, _ := g.m.cmdcg.left.LoadOrStore(g.id, &leftovers{dirs: map[string]bool{}})
			l.(*leftovers).mu.Lock()
			l.(*leftovers).dirs[g.dir] = true
			l.(*leftovers).mu.Unlock()
		}
		g.m.sweepCmdGroups(g.id)
	}
	if kill {
		end() // the result waits: the next exec finds the tree gone
		return
	}
	go end()
}

// sweepCmdGroups removes sandbox id's command cgroups whose leftovers are
// gone (rmdir fails on a cgroup that holds a process).
func (m *Manager) sweepCmdGroups(id string) {
	v, ok := m.cmdcg.left.Load(id)
	if !ok {
		return
	}
	l := v.(*leftovers)
	l.mu.Lock()
	defer l.mu.Unlock()
	for dir := range l.dirs {
		if err := os.Remove(dir); err == nil || errors.Is(err, os.ErrNotExist) {
			delete(l.dirs, dir)
		}
	}
}

// killCgroup kills every process in the cgroup at dir and waits until it
// is empty: cgroup.kill where the kernel has it (5.14 on), else freeze,
// SIGKILL every member, thaw (a frozen process cannot fork meanwhile).
func killCgroup(dir string) error {
	if err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0o644); err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("cgroup.kill: %w", err)
		}
		_ = os.WriteFile(filepath.Join(dir, "cgroup.freeze"), []byte("1"), 0o644)
		if b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs")); err == nil {
			for _, f := range bytes.Fields(b) {
				if pid, err := strconv.Atoi(string(f)); err == nil {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		_ = os.WriteFile(filepath.Join(dir, "cgroup.freeze"), []byte("0"), 0o644)
	}
	return waitEmpty(dir, 2*time.Second)
}

// waitEmpty waits until the cgroup at dir holds no process.
func waitEmpty(dir string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	delay := 100 * time.Microsecond
	for {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
		if err != nil || !parseKeyV2(string(b), "populated") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup %s still holds processes after %s", dir, limit)
		}
		time.Sleep(delay)
		delay = min(delay*2, 10*time.Millisecond)
	}
}

// KillAll kills every process an exec left behind in sandbox idOrName
// (every command cgroup's) and removes their cgroups. It returns how many
// command cgroups it ended.
func (m *Manager) KillAll(ctx context.Context, idOrName string) (int, error) {
	ctr, err := m.find(ctx, idOrName)
	if err != nil {
		return 0, err
	}
	id := ctr.ID()
	root := m.cmdcg.unifiedRoot()
	if root == "" {
		return 0, fmt.Errorf("kill all of sandbox %s: this host has no cgroup v2 hierarchy: %w", id, errdefs.ErrFailedPrecondition)
	}
	dirs, err := m.cmdGroupDirs(id)
	if err != nil {
		return 0, fmt.Errorf("kill all of sandbox %s: %w", id, err)
	}
	n := 0
	for _, dir := range dirs {
		if err := killCgroup(dir); err != nil {
			return n, fmt.Errorf("kill all of sandbox %s: %w", id, err)
		}
		_ = os.Remove(dir)
		n++
	}
	m.sweepCmdGroups(id)
	return n, nil
}

// cmdGroupDirs lists sandbox id's command cgroups.
func (m *Manager) cmdGroupDirs(id string) ([]string, error) {
	parent := filepath.Join(m.cmdcg.unifiedRoot(), m.cgPath(id))
	ents, err := os.ReadDir(parent)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() && strings.HasPrefix(e.Name(), cmdGroupPrefix) {
			out = append(out, filepath.Join(parent, e.Name()))
		}
	}
	return out, nil
}

// dropCmdGroups removes sandbox id's command cgroups once its task is
// gone (the runtime removes the sandbox's cgroup with what is inside it;
// this covers one left behind).
func (m *Manager) dropCmdGroups(id string) {
	m.cmdcg.left.Delete(id)
	if m.cmdcg.unifiedRoot() == "" {
		return
	}
	dirs, _ := m.cmdGroupDirs(id)
	for _, dir := range dirs {
		_ = killCgroup(dir)
		_ = os.Remove(dir)
	}
}
