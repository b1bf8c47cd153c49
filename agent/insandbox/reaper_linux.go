//go:build linux

package insandbox

import (
	"fmt"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// child is a process started by the server.
type child struct {
	pid  int
	done chan struct{} // closed once the process has been reaped
	// Valid after done is closed.
	status syscall.WaitStatus
	rusage syscall.Rusage
	lost   bool // someone else reaped it; status unknown
	// forked is when the fork began and reaped when its exit status was
	// collected: the process's whole life as the init sees it, fork and
	// exec included, which is the floor under any exec's round trip.
	forked, reaped time.Time
}

// lifetime is the time from the fork to the reaping, once done is closed.
func (c *child) lifetime() time.Duration {
	if c.reaped.IsZero() {
		return 0
	}
	return c.reaped.Sub(c.forked)
}

// reaper starts children and collects their exit status.
//
// Its mutex is held across fork+register, across reaping, and across
// signalling a child's tree: a pid therefore cannot exit unseen before it is
// registered, and cannot be recycled between "is it still ours" and kill().
type reaper struct {
	mu   sync.Mutex
	all  bool // wait4(-1): we are PID 1 or a subreaper and must reap orphans too
	live map[int]*child
}

var processReaper atomic.Pointer[reaper]

// StartReaper makes this process reap every child, including orphans that
// get reparented to it, as PID 1 (or a PR_SET_CHILD_SUBREAPER process) must
// or zombies pile up. Servers started afterwards use it. Call it before
// Serve, and never in a process that also uses os/exec: wait4(-1) would steal
// os/exec's children. Without it, each Server waits only for its own pids.
func StartReaper() {
	r := &reaper{all: true, live: make(map[int]*child)}
	if !processReaper.CompareAndSwap(nil, r) {
		return
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGCHLD)
	go func() {
		// Children that exited before Notify produced no signal for us.
		r.reapAll()
		for range sigs {
			r.reapAll()
		}
	}()
}

func newPidReaper() *reaper { return &reaper{live: make(map[int]*child)} }

// reapAll collects every exited child. SIGCHLD coalesces, so one signal may
// stand for many exits: loop until nothing is left.
func (r *reaper) reapAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		var ws syscall.WaitStatus
		var ru syscall.Rusage
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, &ru)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
		if c := r.live[pid]; c != nil {
			delete(r.live, pid)
			c.status, c.rusage, c.reaped = ws, ru, time.Now()
			close(c.done)
		}
	}
}

// spawn runs fork (which must return the new pid) and registers the child.
func (r *reaper) spawn(fork func() (int, error)) (*child, error) {
	r.mu.Lock()
	forked := time.Now()
	pid, err := fork()
	if err != nil {
		r.mu.Unlock()
		if err == syscall.EAGAIN {
			// fork's EAGAIN in a sandbox is its pids cgroup full (or an
			// nproc ulimit): say so, not "resource temporarily unavailable".
			err = fmt.Errorf("cannot start a process: the sandbox is at its pids limit (limits.pids) or nproc ulimit: %w", err)
		}
		return nil, err
	}
	c := &child{pid: pid, done: make(chan struct{}), forked: forked}
	r.live[pid] = c
	// Opened under mu, so the pid cannot have been reaped and reused yet.
	pidfd := openPidfd(pid)
	r.mu.Unlock()
	switch {
	case pidfd != nil:
		go r.waitPidfd(c, pidfd)
	case !r.all:
		go r.waitOne(c)
	}
	return c, nil
}

// openPidfd returns a pidfd for pid on Go's poller, or nil where pidfds are
// unavailable (kernel before 5.3, or refused by seccomp).
func openPidfd(pid int) *os.File {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return nil
	}
	return os.NewFile(uintptr(fd), "pidfd")
}

// waitPidfd reaps c as soon as its pidfd says it has exited. This is the
// fast path for the exec hot path: the poller wakes this goroutine directly,
// where SIGCHLD goes through the signal handler, the runtime's signal
// goroutine and reapAll's goroutine first. Under wait4(-1) reapAll may still
// win the race; either way c is reaped exactly once, under mu.
func (r *reaper) waitPidfd(c *child, pidfd *os.File) {
	defer pidfd.Close()
	if !waitExited(pidfd) {
		// Not pollable after all: block this goroutine's thread instead.
		var info unix.Siginfo
		for {
			err := unix.Waitid(unix.P_PIDFD, int(pidfd.Fd()), &info, unix.WEXITED|unix.WNOWAIT, nil)
			if err != unix.EINTR {
				break
			}
		}
	}
	// Without wait4(-1) nobody else reaps our pids, and this one has
	// exited, so a blocking wait4 returns at once.
	flags := 0
	if r.all {
		flags = syscall.WNOHANG
	}
	r.reap(c, flags)
}

// reap reaps c, which has exited, under mu, unless reapAll already has.
// With WNOHANG in flags a child not reapable yet is left to reapAll.
func (r *reaper) reap(c *child, flags int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.live[c.pid] != c {
		return // reapAll got it
	}
	for {
		pid, err := syscall.Wait4(c.pid, &c.status, flags, &c.rusage)
		if err == syscall.EINTR {
			continue
		}
		if err == nil && pid == 0 {
			return // not reapable yet after all: reapAll will be
		}
		c.lost = err != nil
		c.reaped = time.Now()
		break
	}
	delete(r.live, c.pid)
	close(c.done)
}

// waitExited blocks until the process behind pidfd, which is on Go's
// poller, has exited or been reaped. It reports false if pidfd is not on the
// poller. Exit is checked before every wait: the poller drops a readiness
// event that came before the first wait.
func waitExited(pidfd *os.File) bool {
	rc, err := pidfd.SyscallConn()
	if err != nil {
		return false
	}
	err = rc.Read(func(fd uintptr) bool {
		for {
			var info unix.Siginfo
			err := unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
			if err == unix.EINTR {
				continue
			}
			// ECHILD: already reaped (by reapAll).
			return err != nil || info.Signo != 0
		}
	})
	return err == nil
}

// waitOne waits for a single child without reaping it first (WNOWAIT), so
// the pid stays allocated to the zombie until we reap it under mu.
func (r *reaper) waitOne(c *child) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, c.pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			break
		}
	}
	r.reap(c, 0)
}

// kill SIGKILLs c's process tree (its session and process group), unless
// c's pid already belongs to another child we started.
func (r *reaper) kill(c *child) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if other := r.live[c.pid]; other != nil && other != c {
		return
	}
	killSession(c.pid)
}

// killEscapees SIGKILLs the processes the init adopted (orphans: its
// children it did not start) that started no earlier than since (clock
// ticks since boot), until none is left: a killed orphan's children come
// to the init in turn. A tree that left its session by setsid or a double
// fork ends up there. An orphan of another command started in the same
// clock tick or later is taken too, which is why only a foreground
// command's kill does this, and only where boxd has no cgroup for it.
func (r *reaper) killEscapees(since uint64) {
	self := os.Getpid()
	for range 64 {
		found := false
		eachProc(func(st procStat) {
			if st.ppid != self || st.start < since {
				return
			}
			r.mu.Lock()
			_, own := r.live[st.pid]
			r.mu.Unlock()
			if !own {
				found = true
				syscall.Kill(st.pid, syscall.SIGKILL)
			}
		})
		if !found {
			return
		}
		time.Sleep(time.Millisecond)
	}
}
