//go:build linux

// Room: resources. Strays: what a command set loose before boxd placed it
// (an orphan that made itself a session leader), found because boxd knows
// every process it asked the init for.

package runtime

import (
	"bytes"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	// maxPlacePasses bounds one command's placing: passes that moved
	// something (a fork bomb's tree keeps growing until it is placed).
	maxPlacePasses = 1000
	// strayWait is how long placing waits for the pids of commands asked
	// for at the same time before it takes unknown processes for strays.
	strayWait = 2 * time.Second
)

// spawning is one sandbox's commands being started and placed: every
// process the init starts is one boxd asked for (an exec, a background
// process, a session's shell), so once all of them reported their pid,
// an unknown process in the sandbox's own cgroup that started since is a
// stray of a command being placed.
type spawning struct {
	mu      sync.Mutex
	asking  map[*cmdGroup]bool // asked for, pid not reported yet
	placing map[*cmdGroup]bool // pid reported, placing runs
	free    []string           // empty command cgroups to use again
	// init is the sandbox's init as rootProcs read it (its host pid
	// stays while it lives; a new init has another).
	init procInfo
	// acct: the command cgroups account memory (accounted).
	acctOnce sync.Once
	acct     bool
}

func (c *cmdGroups) spawning(id string) *spawning {
	if v, ok := c.spawns.Load(id); ok {
		return v.(*spawning)
	}
	v, _ := c.spawns.LoadOrStore(id, newSpawning())
	return v.(*spawning)
}

func newSpawning() *spawning {
	return &spawning{asking: map[*cmdGroup]bool{}, placing: map[*cmdGroup]bool{}}
}

// ask notes g asked for and hands it an empty cgroup a command before it
// left, if there is one ("": make one).
func (s *spawning) ask(g *cmdGroup) (dir string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asking[g] = true
	if n := len(s.free); n > 0 {
		dir, s.free = s.free[n-1], s.free[:n-1]
	}
	return dir
}

// maxFreeGroups bounds the empty command cgroups kept per sandbox.
const maxFreeGroups = 4

// reuse keeps the cgroup at dir for a later command when it is empty and
// fewer than maxFreeGroups are kept: making and removing a cgroup costs
// the host about 0.1 ms of CPU, which a command that leaves nothing
// behind need not pay. It reports whether it kept it.
func (s *spawning) reuse(dir string) bool {
	b, err := os.ReadFile(dir + "/cgroup.events")
	if err != nil || parseKeyV2(string(b), "populated") {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.free) >= maxFreeGroups {
		return false
	}
	s.free = append(s.free, dir)
	return true
}

// dropped: the command was asked for and never ran.
func (s *spawning) dropped(g *cmdGroup) {
	s.mu.Lock()
	delete(s.asking, g)
	s.mu.Unlock()
}

func (s *spawning) begin(g *cmdGroup) {
	s.mu.Lock()
	delete(s.asking, g)
	s.placing[g] = true
	s.mu.Unlock()
}

func (s *spawning) end(g *cmdGroup) {
	s.mu.Lock()
	delete(s.placing, g)
	s.mu.Unlock()
}

func (s *spawning) initInfo() procInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.init
}

func (s *spawning) setInit(p procInfo) {
	s.mu.Lock()
	s.init = p
	s.mu.Unlock()
}

func (s *spawning) linkedTo(g *cmdGroup) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), g.linked...)
}

// claim decides where strays that started at or after since go: g's own
// cgroup when no other command being placed could own them (it was asked
// for later), else a cgroup of their own, linked to every such command
// and to g, so that whichever of them is killed takes them along.
func (s *spawning) claim(g *cmdGroup, since uint64) (dir string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var others []*cmdGroup
	for o := range s.placing {
		if o != g && o.sent <= since {
			others = append(others, o)
		}
	}
	if len(others) == 0 {
		return g.dir
	}
	dir = g.m.cmdGroupDir(g.parent)
	if mkCgroup(dir) != nil {
		return g.dir
	}
	for _, o := range append(others, g) {
		o.linked = append(o.linked, dir)
	}
	return dir
}

// strayPlacer moves one command's strays and their children.
type strayPlacer struct {
	g   *cmdGroup
	dir string       // where they go, once claimed
	in  map[int]bool // host pids moved
}

// known is what take must leave alone: the pids (in the sandbox) of the
// commands being placed, and from when on an unknown process may be a
// command asked for whose pid is not known yet (the earliest such ask;
// math.MaxUint64 when there is none).
func (s *spawning) known() (roots map[int]bool, unsure uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	roots = make(map[int]bool, len(s.placing))
	for o := range s.placing {
		roots[o.nsPid] = true
	}
	unsure = math.MaxUint64
	for o := range s.asking {
		unsure = min(unsure, o.sent)
	}
	return roots, unsure
}

// take moves the strays in the sandbox's cgroup that started at or after
// since: the init's children that are no command boxd asked for
// (pickStrays). It reports whether it moved any, and wait when some
// could still be a command asked for that has not named its pid: they
// started after that command was asked for.
func (p *strayPlacer) take(procs []procInfo, since uint64) (moved, wait bool) {
	// procs was read first, then what is known: a command in the list
	// was asked for by then, so it is either still unnamed (unsure),
	// being placed (known), or placed, and then no longer in the
	// sandbox's own cgroup, which is checked again right before the move.
	roots, unsure := p.g.sp.known()
	rel := p.g.m.cgPath(p.g.id)
	started := make(map[int]uint64, len(procs))
	for _, q := range procs {
		started[q.pid] = q.start
	}
	var strays []int
	for _, pid := range pickStrays(procs, since, roots, p.in) {
		if started[pid] >= unsure {
			wait = true
			continue
		}
		if inCgroup(pid, rel) {
			strays = append(strays, pid)
		}
	}
	if len(strays) == 0 {
		return false, wait
	}
	if p.dir == "" {
		p.dir = p.g.sp.claim(p.g, since)
	}
	for _, pid := range strays {
		p.in[pid] = true
	}
	return p.g.moveAll(strays, p.dir), wait
}

// pickStrays picks among procs the init's adopted orphans, leaders of a
// session or not, that started at or after since, are none of the
// commands being placed (roots) nor in one's session, and are not in
// yet. Their children follow them (strayPlacer.follow).
func pickStrays(procs []procInfo, since uint64, roots, in map[int]bool) []int {
	init := initPid(procs)
	if init == 0 {
		return nil
	}
	var out []int
	for _, q := range procs {
		if q.pid == init || q.ppid != init || q.start < since || roots[q.nsPid] || roots[q.nsSid] || in[q.pid] {
			continue
		}
		out = append(out, q.pid)
	}
	return out
}

// inCgroup reports whether process pid is in the cgroup rel (a path from
// the root of the unified hierarchy) itself.
func inCgroup(pid int, rel string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if path, ok := strings.CutPrefix(line, "0::"); ok {
			return path == rel
		}
	}
	return false
}

// follow moves the children of moved strays still in the sandbox's cgroup.
func (p *strayPlacer) follow(procs []procInfo) bool {
	var fresh []int
	for grew := true; grew; {
		grew = false
		for _, q := range procs {
			if !p.in[q.pid] && p.in[q.ppid] {
				p.in[q.pid], grew = true, true
				fresh = append(fresh, q.pid)
			}
		}
	}
	return len(fresh) > 0 && p.g.moveAll(fresh, p.dir)
}

func initPid(procs []procInfo) int {
	for _, p := range procs {
		if p.nsPid == 1 {
			return p.pid
		}
	}
	return 0
}

// killSince kills the processes in the cgroup at dir that started at or
// after since (clock ticks since boot), sparing older ones (the leftovers
// of a session's earlier commands) and the process whose pid in the
// sandbox is shell (0: none): frozen meanwhile, so none of them forks
// past the kill.
func killSince(dir string, since uint64, shell int) {
	freeze := func(v string) { _ = os.WriteFile(dir+"/cgroup.freeze", []byte(v), 0o644) }
	for range 8 {
		freeze("1")
		n := 0
		for _, pid := range cgroupPids(dir) {
			if p, ok := readProcInfo(pid); ok && p.start >= since && (shell == 0 || p.nsPid != shell) {
				_ = killPid(pid)
				n++
			}
		}
		freeze("0")
		if n == 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// cgroupPids lists the processes (host pids) in the cgroup at dir.
func cgroupPids(dir string) []int {
	b, err := os.ReadFile(dir + "/cgroup.procs")
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range bytes.Fields(b) {
		if pid, err := strconv.Atoi(string(f)); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

func killPid(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }
