//go:build linux

// Room: create. Starting a sandbox's init: its task, the hand-off of its
// settings and socket, and waiting until it answers. Create, Start and
// the restart of a dead init all go through startInit.

package runtime

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/boxd-dev/boxd/agent/handoff"
	"github.com/boxd-dev/boxd/agent/wire"
	"github.com/boxd-dev/boxd/oci"
)

// makeHandoffDir creates the directory mounted read-only at
// wire.ChannelDir: host root's and 0711, so code in the sandbox can reach
// the hand-off socket in it (which only the sandbox's root may connect to)
// but can neither list nor change anything there.
func (m *Manager) makeHandoffDir(id string) error {
	dir := m.handoffDir(id)
	if err := os.Mkdir(dir, 0o711); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("hand-off dir: %w", err)
	}
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("hand-off dir %s: not a directory (%v)", dir, err)
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		return fmt.Errorf("hand-off dir: %w", err)
	}
	return nil
}

// newTask creates a sandbox's init task. Its own output goes to a file: a
// FIFO would need boxd to drain it, and nothing drains it while boxd is
// down. A log a previous init left large is trimmed to its tail first.
func (m *Manager) newTask(ctx context.Context, ctr client.Container) (client.Task, error) {
	logPath := m.initLogPath(ctr.ID())
	if err := trimLog(logPath, initLogMax, initLogKeep); err != nil {
		m.log.Warn("init log", "sandbox", ctr.ID(), "err", err)
	}
	// A shared shim (shimgroups.go) can be on its way out when a task of
	// its group is created: its last container was deleted a moment ago
	// (a stop or an init restart of the group's only member) and its
	// socket still answers. The create then fails before anything is
	// made; a moment later the socket is gone and a new shim starts.
	var task client.Task
	var err error
	ioc := cio.LogFile(logPath)
	if m.isGvisor(ctr.ID()) {
		if ioc, err = gvLogFile(logPath); err != nil {
			return nil, err
		}
	}
	for attempt := 0; ; attempt++ {
		task, err = ctr.NewTask(ctx, ioc)
		if err == nil || attempt == 3 || !shimGone(err) || ctx.Err() != nil {
			return task, err
		}
		m.log.Debug("task: the shim went away, trying again", "sandbox", ctr.ID(), "err", err)
		time.Sleep(time.Duration(attempt+1) * 50 * time.Millisecond)
	}
}

// shimGone says whether a task create failed because the shim it reached
// closed or refused the connection, not because of the task itself.
func shimGone(err error) bool {
	msg := err.Error()
	for _, s := range []string{"ttrpc: closed", "connection refused", "connection reset by peer", "broken pipe"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// startInit starts the init of ctr (whose runtime-spec is spec) and hands
// it its channel, and returns once the init answers on it. boxd makes the
// agent's listening socket itself, in the sandbox's host directory, and
// listens on the hand-off socket; once the task exists its pid is known,
// and only a peer with that pid and the sandbox root's host uid gets the
// init's settings and the listener (agent/handoff). On failure the task is
// gone again. phase, if not nil, marks progress for timing logs.
//
// beforeTask, if not nil, runs before the task is created (the network
// namespace it joins exists then); beforeStart, if not nil, runs once the
// task exists and before it starts (the network attach is finished there).
// An error of either fails the start.
func (m *Manager) startInit(ctx context.Context, ctr client.Container, spec *specs.Spec, phase func(string), beforeTask, beforeStart func() error) (_ client.Task, retErr error) {
	if phase == nil {
		phase = func(string) {}
	}
	id := ctr.ID()
	cfg, err := oci.InitConfig(spec)
	if err != nil {
		return nil, err
	}
	uid, gid, err := rootHostIDs(spec)
	if err != nil {
		return nil, err
	}
	if err := m.makeHandoffDir(id); err != nil {
		return nil, err
	}
	// A gVisor sandbox's init gets its channel another way
	// (agent/gvchannel): Config from a file, and a socket it binds itself.
	gv := spec.Process != nil && slices.Contains(spec.Process.Args, wire.GvisorFlag)
	var agentLn *os.File
	var hs *handoff.Listener
	if gv {
		if err := m.gvPrepare(id, cfg, uid, gid); err != nil {
			return nil, err
		}
	} else {
		agentLn, err = handoff.ListenAgent(m.socketPath(id))
		if err != nil {
			return nil, err
		}
		// The init holds its own copy once handed over; boxd never serves it.
		defer agentLn.Close()
		defer func() {
			if retErr != nil {
				_ = os.Remove(m.socketPath(id))
			}
		}()
		hs, err = handoff.Listen(filepath.Join(m.handoffDir(id), handoff.SocketName), int(uid), int(gid))
		if err != nil {
			return nil, err
		}
		defer hs.Close()
	}

	if beforeTask != nil {
		if err := beforeTask(); err != nil {
			return nil, err
		}
	}
	task, err := m.newTask(ctx, ctr)
	if err != nil {
		return nil, fmt.Errorf("task: %w", err)
	}
	defer func() {
		if retErr == nil {
			return
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if _, err := task.Delete(cctx, client.WithProcessKill); err != nil && !errdefs.IsNotFound(err) {
			m.log.Error("cleanup: delete task", "sandbox", id, "err", err)
		}
	}()
	phase("task")
	if err := m.blkio.account(m.cgPath(id)); err != nil {
		m.log.Debug("block I/O figures may stay 0", "sandbox", id, "err", err)
	}
	if beforeStart != nil {
		if err := beforeStart(); err != nil {
			return nil, err
		}
	}
	if err := task.Start(ctx); err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	phase("start")
	deadline := time.Now().Add(m.cfg.ReadyTimeout)
	if gv {
		if err := m.gvPinInit(ctx, id, task, uid, deadline); err != nil {
			return nil, err
		}
	} else if err := m.handOff(ctx, id, task, hs, handoff.Peer{Pid: int(task.Pid()), UID: uid}, cfg, agentLn, deadline); err != nil {
		return nil, err
	}
	phase("handoff")
	if err := m.waitReady(ctx, id, task, deadline); err != nil {
		return nil, err
	}
	phase("ready")
	return task, nil
}

// rootHostIDs is the host uid and gid the sandbox's root maps to.
func rootHostIDs(spec *specs.Spec) (uid, gid uint32, _ error) {
	if spec.Linux == nil || len(spec.Linux.UIDMappings) == 0 || len(spec.Linux.GIDMappings) == 0 ||
		spec.Linux.UIDMappings[0].ContainerID != 0 || spec.Linux.GIDMappings[0].ContainerID != 0 {
		return 0, 0, errors.New("spec maps no user namespace root")
	}
	return spec.Linux.UIDMappings[0].HostID, spec.Linux.GIDMappings[0].HostID, nil
}

// handOff waits for the task's init to take cfg and the agent listener,
// while watching that it has not died.
func (m *Manager) handOff(ctx context.Context, id string, task client.Task, hs *handoff.Listener, peer handoff.Peer, cfg handoff.Config, agentLn *os.File, deadline time.Time) error {
	octx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	log := m.log.With("sandbox", id)
	offered := make(chan error, 1)
	go func() {
		offered <- hs.Offer(octx, peer, cfg, agentLn, func(format string, args ...any) {
			log.Warn(fmt.Sprintf(format, args...))
		})
	}()
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	for {
		select {
		case err := <-offered:
			if err == nil {
				return nil
			}
			if exited := m.initExited(ctx, id, task); exited != nil {
				return exited
			}
			return fmt.Errorf("init did not take its channel within %s: %w", m.cfg.ReadyTimeout, err)
		case <-poll.C:
			if exited := m.initExited(ctx, id, task); exited != nil {
				cancel()
				<-offered
				return exited
			}
		}
	}
}

// waitReady polls the init's socket until it answers, the task dies, or
// deadline passes.
func (m *Manager) waitReady(ctx context.Context, id string, task client.Task, deadline time.Time) error {
	c := m.agent(id)
	delay := time.Millisecond
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := c.Ping(pctx)
		cancel()
		if err == nil {
			return nil
		}
		if exited := m.initExited(ctx, id, task); exited != nil {
			return exited
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("init did not answer within %s: %w", m.cfg.ReadyTimeout, err)
		}
		time.Sleep(delay)
		if delay < 50*time.Millisecond {
			delay *= 2
		}
	}
}

// initExited returns an error quoting the init's log if its task has
// stopped, and nil while it runs.
func (m *Manager) initExited(ctx context.Context, id string, task client.Task) error {
	st, err := task.Status(ctx)
	if err != nil || st.Status != client.Stopped {
		return nil
	}
	// The log goes with the failed sandbox: quote it.
	// The shim copies the init's output to the file asynchronously;
	// deleting the task makes it finish (the create's cleanup would
	// delete it anyway).
	_, _ = task.Delete(ctx)
	var logTail []byte
	for i := 0; i < 40 && len(logTail) == 0; i++ {
		logTail, _ = readLogTail(m.initLogPath(id), initLogQuote)
		if len(logTail) == 0 {
			time.Sleep(25 * time.Millisecond)
		}
	}
	if st.ExitStatus == wire.ExitBadUser {
		return fieldErr("user", "the init could not resolve the sandbox's default user: %q", logTail)
	}
	return fmt.Errorf("init exited with status %d before it was ready: %q", st.ExitStatus, logTail)
}
