//go:build linux

// Command boxd-init is PID 1 of every boxd sandbox. boxd bind-mounts it
// read-only at wire.InitPath; it reaps orphans and serves the agent socket
// through which boxd runs commands and moves files inside the sandbox.
//
// It reads nothing from its environment (which boxd keeps to PATH): its
// settings and the environment of commands come from boxd in the hand-off
// at start, with the agent listener (agent/handoff), so an image or a
// request cannot steer the init or its Go runtime (GODEBUG, GOMAXPROCS,
// GOGC, GOTRACEBACK, ...). Its only argument, for tests, is
// "--handoff PATH" (default wire.ChannelDir/handoff.SocketName).
package main

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxd-dev/boxd/agent/gvchannel"
	"github.com/boxd-dev/boxd/agent/handoff"
	"github.com/boxd-dev/boxd/agent/insandbox"
	"github.com/boxd-dev/boxd/agent/wire"
)

func main() {
	// The init idles most of its life in every sandbox: trade a little CPU
	// for a small heap, and keep few threads.
	debug.SetGCPercent(50)
	debug.SetMemoryLimit(64 << 20)
	// One P: the init's work is a few short bursts per operation between
	// waits on the host, a pipe or a child, which one P runs without
	// handing goroutines across threads. With a second P every goroutine
	// an exec starts woke an idle thread to spin for it, while the
	// command it spawned wanted the CPU (A/B in a sandbox, exec of true:
	// 50-130 us faster back to back, more after idling; file copies
	// unchanged within noise).
	runtime.GOMAXPROCS(1)
	// containerd's seccomp profile allows ptrace on this kernel: a
	// non-dumpable init cannot be attached to or have its memory read by
	// code in the sandbox, whatever its uid. Commands are not affected
	// (execve resets the flag).
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		logf("prctl(PR_SET_DUMPABLE): %v", err)
	}

	var hc handoff.Config
	var ln net.Listener
	var err error
	if len(os.Args) == 2 && os.Args[1] == wire.GvisorFlag {
		hc, ln, err = gvisorChannel()
	} else {
		path := filepath.Join(wire.ChannelDir, handoff.SocketName)
		if len(os.Args) == 3 && os.Args[1] == "--handoff" {
			path = os.Args[2]
		}
		hc, ln, err = handoff.Receive(path, handoffTimeout)
	}
	if err != nil {
		logf("%v", err)
		os.Exit(1)
	}
	prewarmThreads(hc.Pids)

	cfg := insandbox.InitConfig{
		Workdir:  hc.Workdir,
		Listener: ln,
		BaseEnv:  insandbox.WithRootHome(hc.Env),
		User:     hc.User,
		Logf:     logf,
	}
	if len(os.Args) == 2 && os.Args[1] == wire.GvisorFlag {
		cfg.Rebind = bindAgent
	}
	if cfg.Workdir == "" {
		cfg.Workdir = "/workspace"
	}
	if err := insandbox.RunInit(cfg); err != nil {
		logf("%v", err)
		if errors.Is(err, insandbox.ErrBadUser) {
			os.Exit(wire.ExitBadUser)
		}
		os.Exit(1)
	}
}

// gvisorChannel is the init's channel in a gVisor sandbox
// (agent/gvchannel): its Config from the read-only file boxd wrote, and an
// agent socket it binds itself in wire.AgentDir (runsc's gofer makes it a
// host socket, which boxd connects to).
func gvisorChannel() (handoff.Config, net.Listener, error) {
	b, err := os.ReadFile(filepath.Join(wire.ChannelDir, gvchannel.ConfigName))
	if err != nil {
		return handoff.Config{}, nil, err
	}
	hc, err := handoff.Decode(b)
	if err != nil {
		return hc, nil, err
	}
	ln, err := bindAgent()
	return hc, ln, err
}

// bindAgent binds the agent socket in wire.AgentDir, replacing whatever
// is there; also after a checkpoint (insandbox.InitConfig.Rebind).
func bindAgent() (net.Listener, error) {
	path := filepath.Join(wire.AgentDir, wire.SocketName)
	_ = os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	// The file stays when the listener closes: boxd removes it.
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	return ln, nil
}

// handoffTimeout bounds the wait for boxd's hand-off; boxd listens before
// it starts the init, so only a boxd that died meanwhile is slower.
const handoffTimeout = time.Minute

// prewarmThreads starts, while it still can, the OS threads the init will
// need. The pids limit counts threads, so a fork bomb in the sandbox can
// leave none to spare; a Go runtime that then fails to start a thread
// aborts, and with PID 1 the whole sandbox would go. The runtime keeps idle
// threads for reuse, so threads made now are there later. A third of the
// pids limit, at most 12, leaves room for commands in a small sandbox.
func prewarmThreads(pidsLimit int64) {
	n := int64(12)
	if pidsLimit > 0 && pidsLimit/3 < n {
		n = pidsLimit / 3
	}
	var started sync.WaitGroup
	release := make(chan struct{})
	for i := int64(0); i < n; i++ {
		started.Add(1)
		go func() {
			runtime.LockOSThread() // one thread each while all are held
			started.Done()
			<-release
			runtime.UnlockOSThread()
		}()
	}
	started.Wait()
	close(release)
}

// stderrLog is the init's log: stderr, which the runtime collects into a
// file on the host, within logBudget.
var stderrLog = newBudgetLog(os.Stderr, logBudget)

func logf(format string, args ...any) { stderrLog.logf(format, args...) }
