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
	// spawns holds, per sandbox id, the groups being made (cmdgroups_place.go).
	spawns sync.Map // id -> *spawning
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
	sent   uint64 // bootTicks when the exec was asked for
	// started is set when the init reported the command (start ran);
	// done is closed once start's placing is over.
	started bool
	done    chan struct{}
	// sp is the sandbox's spawning state; nsPid the command's pid there.
	sp    *spawning
	nsPid int
	// linked are cgroups of strays this command may own (several were
	// being placed when they were found): killed with it. Guarded by sp.mu.
	linked []string
	// keep: the cgroup outlives its command's start (a background
	// process's, a session's): it joins the leftovers once placed.
	keep bool
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
	g := &cmdGroup{m: m, id: id, parent: parent, sent: bootTicks(), done: make(chan struct{}), sp: m.cmdcg.spawning(id)}
	if g.dir = g.sp.ask(g); g.dir == "" {
		g.dir = m.cmdGroupDir(parent)
	}
	return g
}

// cmdGroupDir names a fresh command cgroup in parent.
func (m *Manager) cmdGroupDir(parent string) string {
	return filepath.Join(parent, cmdGroupPrefix+strconv.FormatUint(m.cmdcg.seq.Add(1), 10))
}

// start makes the cgroup and places the command in it, in the background:
// the init's started frame named it (nsPid in the sandbox).
func (g *cmdGroup) start(nsPid int) {
	g.started = true
	g.nsPid = nsPid
	g.sp.begin(g)
	go func() {
		defer close(g.done)
		defer g.sp.end(g)
		if err := mkCgroup(g.dir); err != nil {
			g.dir = "" // no sandbox cgroup here (a build's, say): nothing to do
			return
		}
		g.place(nsPid)
		if g.keep {
			g.m.leaveCmdGroup(g.id, g.dir)
		}
	}()
}

// mkCgroup makes the cgroup at dir; one left empty by an earlier life
// of the sandbox's init (a background process's, named by its id) is
// taken as it is.
func mkCgroup(dir string) error {
	err := os.Mkdir(dir, 0o755)
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	return err
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
// init starts every command as a session leader) and the children of what
// is moved, pass after pass until one moves nothing: whatever starts later
// is born in the command's cgroup. Then the strays: what the command's
// tree left with the init meanwhile (a double fork, a setsid), found
// because boxd knows every process it asked the init for (strayPlacer).
func (g *cmdGroup) place(nsPid int) {
	since := g.sent // the command started no earlier than this
	in := map[int]bool{}
	strays := &strayPlacer{g: g, in: map[int]bool{}}
	deadline := time.Now().Add(strayWait)
	for range maxPlacePasses {
		procs := g.rootProcs()
		moved := g.moveAll(adopt(procs, nsPid, &since, in), g.dir)
		moved = strays.follow(procs) || moved
		// A command asked for but not yet reported may be one of the
		// unknown processes: take waits for its pid then.
		took, wait := strays.take(procs, since)
		if moved || took {
			continue
		}
		if !wait || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if strays.dir != "" && strays.dir != g.dir {
		g.m.leaveCmdGroup(g.id, strays.dir) // removed once its strays are gone
	}
}

// moveAll moves pids into the cgroup at dir and reports whether any moved.
func (g *cmdGroup) moveAll(pids []int, dir string) bool {
	moved := false
	for _, pid := range pids {
		if moveTo(dir, pid) == nil {
			moved = true
		}
	}
	return moved
}

// adopt picks the command's processes among procs into in: the command,
// its session and the children of all of these (in holds those of
// earlier passes). since is lowered to the command's own start. It
// returns the ones added. The orphans its tree left with the init are
// strays (pickStrays).
func adopt(procs []procInfo, nsPid int, since *uint64, in map[int]bool) []int {
	init := initPid(procs)
	for _, p := range procs {
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
			if p.nsPid == nsPid || p.nsSid == nsPid || in[p.ppid] {
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

// moveTo moves the process pid (host) into the cgroup at dir.
func moveTo(dir string, pid int) error {
	return os.WriteFile(filepath.Join(dir, "cgroup.procs"), strconv.AppendInt(nil, int64(pid), 10), 0o644)
}

// rootProcs lists the processes in the sandbox's own cgroup (not in a
// command's): its init, and commands not placed yet.
func (g *cmdGroup) rootProcs() []procInfo {
	var out []procInfo
	init := g.sp.initInfo()
	for _, pid := range cgroupPids(g.parent) {
		if pid == init.pid && pid != 0 {
			out = append(out, init) // the init is there for good: read once
			continue
		}
		if p, ok := readProcInfo(pid); ok {
			if p.nsPid == 1 {
				g.sp.setInit(p)
			}
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
// timeout, a closed stream) every process in it is killed, and in the
// stray cgroups linked to it, and the cgroup removed before it returns.
// Otherwise, in the background, it is removed if empty, and kept while the
// command's leftovers run, to be removed once they are gone.
func (g *cmdGroup) finish(kill bool) {
	if g == nil {
		return
	}
	if !g.started {
		g.sp.dropped(g) // the command never ran
		g.sp.reuse(g.dir)
		return
	}
	end := func() {
		<-g.done
		if g.dir == "" {
			return
		}
		if kill {
			for _, dir := range g.sp.linkedTo(g) {
				if err := killCgroup(dir); err != nil {
					g.m.log.Warn("kill a command's cgroup", "sandbox", g.id, "cgroup", dir, "error", err)
				}
				g.m.leaveCmdGroup(g.id, dir)
			}
			if err := killCgroup(g.dir); err != nil {
				g.m.log.Warn("kill a command's cgroup", "sandbox", g.id, "cgroup", g.dir, "error", err)
			}
		}
		if g.keep || !g.sp.reuse(g.dir) {
			g.m.leaveCmdGroup(g.id, g.dir)
		}
		g.m.sweepCmdGroups(g.id)
	}
	if kill {
		end() // the result waits: the next exec finds the tree gone
		return
	}
	go end()
}

// leaveCmdGroup removes the cgroup at dir, or, while it holds processes,
// lists it with sandbox id's leftovers, removed once empty.
func (m *Manager) leaveCmdGroup(id, dir string) {
	if err := os.Remove(dir); err != nil && errors.Is(err, syscall.EBUSY) {
		l, _ := m.cmdcg.left.LoadOrStore(id, &leftovers{dirs: map[string]bool{}})
		l.(*leftovers).mu.Lock()
		l.(*leftovers).dirs[dir] = true
		l.(*leftovers).mu.Unlock()
	}
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
	return m.groupDirs(id, cmdGroupPrefix)
}

// groupDirs lists sandbox id's cgroups whose names start with a prefix.
func (m *Manager) groupDirs(id string, prefixes ...string) ([]string, error) {
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
		if e.IsDir() && hasAnyPrefix(e.Name(), prefixes) {
			out = append(out, filepath.Join(parent, e.Name()))
		}
	}
	return out, nil
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// dropCmdGroups removes sandbox id's command cgroups once its task is
// gone (the runtime removes the sandbox's cgroup with what is inside it;
// this covers one left behind).
func (m *Manager) dropCmdGroups(id string) {
	m.cmdcg.left.Delete(id)
	m.cmdcg.spawns.Delete(id)
	if m.cmdcg.unifiedRoot() == "" {
		return
	}
	dirs, _ := m.groupDirs(id, cmdGroupPrefix, procGroupPrefix, sessionGroupPrefix)
	for _, dir := range dirs {
		_ = killCgroup(dir)
		_ = os.Remove(dir)
	}
}
