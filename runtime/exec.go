//go:build linux

package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/containerd/containerd/api/types/runc/options"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"

	"github.com/boxd-dev/boxd/agent/host"
	"github.com/boxd-dev/boxd/agent/wire"
	"github.com/boxd-dev/boxd/internal/events"
)

// ExecExited records how a command run through the process API ended;
// idOrName is as the caller gave it (an id, or a name resolved here).
func (m *Manager) ExecExited(idOrName string, res ExecResult, err error) {
	id := idOrName
	if !idRe.MatchString(id) {
		if ctr, ferr := m.find(namespaces.WithNamespace(context.Background(), m.cfg.Namespace), idOrName); ferr == nil {
			id = ctr.ID()
		}
	}
	m.execExited(id, res, err)
}

// execExited records how a command ended: its exit code (and signal), or
// the error that ended the call.
func (m *Manager) execExited(id string, res ExecResult, err error) {
	attrs := map[string]string{"exit_code": strconv.Itoa(res.ExitCode)}
	if res.Signal != "" {
		attrs["signal"] = res.Signal
	}
	if res.TimedOut {
		attrs["timed_out"] = "true"
	}
	if err != nil {
		attrs = map[string]string{"error": truncate(err.Error(), 256)}
	}
	m.emit(events.ExecExited, id, attrs)
}

var idRe = regexp.MustCompile(`^[0-9a-f]{12}$`)

// runtimeOptions names the runc binary for the shim. containerd 2.2 has no
// daemon-wide setting for it outside CRI.
func runtimeOptions(runc string) any {
	if runc == "" {
		return nil
	}
	return &options.Options{BinaryName: runc}
}

// agentFor returns the channel to a sandbox's init. An id the inventory
// knows as client-visible needs no containerd round trip: this is the exec
// hot path. Anything else (a name, a warm-pool member not yet handed out,
// an id another boxd made) goes through find, which checks the managed
// label. While the sandbox's dead init is being replaced, it waits for the
// new one (up to restartWait) instead of failing on the old one's socket.
func (m *Manager) agentFor(ctx context.Context, idOrName string) (*host.Client, string, error) {
	// Another user's sandbox takes the slow path, where find reports it
	// not found (after looking for a sandbox of the caller's so named).
	if owner, ok := m.inv.visibleOwner(idOrName); ok && mayUse(ctx, owner) && idRe.MatchString(idOrName) {
		m.awaitRelease(ctx, idOrName, restartWait)
		// A kept connection to the init stands for its socket: the
		// pool is dropped whenever the init is replaced.
		if m.agentLinkFor(idOrName).live() || m.agentReady(idOrName) {
			return m.agentClient(ctx, idOrName)
		}
	}
	ctr, err := m.find(ctx, idOrName)
	if err != nil {
		return nil, "", err
	}
	m.awaitRelease(ctx, ctr.ID(), restartWait)
	return m.agentClient(ctx, ctr.ID())
}

// agentClient is the channel to a found sandbox's init: refused while the
// sandbox is paused (a frozen init would leave the call hanging), and
// counted as use for idle expiry while any connection of it is open.
func (m *Manager) agentClient(ctx context.Context, id string) (*host.Client, string, error) {
	if err := m.checkPaused(ctx, id); err != nil {
		return nil, "", err
	}
	l := m.agentLinkFor(id)
	if c := l.client.Load(); c != nil {
		return c, id, nil
	}
	c := m.agent(id).Tracked(func() func() { return m.track(id) }).Pooled(l.pool)
	l.client.Store(c)
	return c, id, nil
}

// agentLink is what the exec path keeps per sandbox between calls: the
// pool of kept connections to its init (execs and pings reuse them
// instead of dialling, host.Pool) and the client that uses it, built once
// (which runtime the sandbox is on is a look at the state directory). It
// lives as long as the init: dropped when the sandbox is deleted or its
// init replaced.
type agentLink struct {
	pool   *host.Pool
	client atomic.Pointer[host.Client]
}

// live reports whether the link holds a kept connection to the init, which
// is then known to be up (a check for its socket is not needed).
func (l *agentLink) live() bool { return l.client.Load() != nil && l.pool.Idle() > 0 }

func (m *Manager) agentLinkFor(id string) *agentLink {
	if l, ok := m.agentLinks.Load(id); ok {
		return l.(*agentLink)
	}
	l, _ := m.agentLinks.LoadOrStore(id, &agentLink{pool: host.NewPool()})
	return l.(*agentLink)
}

// dropAgentPool closes sandbox id's kept connections and forgets its
// client: at delete, and when its init is replaced (they would only find
// the old one gone).
func (m *Manager) dropAgentPool(id string) {
	if l, ok := m.agentLinks.LoadAndDelete(id); ok {
		l.(*agentLink).pool.Close()
	}
}

// restartWait bounds how long a call waits for a sandbox's restart (new
// task, start, init ready: well under a second unless the host is loaded).
const restartWait = 10 * time.Second

// notRunning turns a failed connection to the init into a clear
// failed_precondition error.
func (m *Manager) notRunning(ctx context.Context, id string, err error) error {
	if err == nil {
		return nil
	}
	var errno syscall.Errno
	if errors.Is(err, os.ErrNotExist) || (errors.As(err, &errno) && (errno == syscall.ECONNREFUSED || errno == syscall.ENOENT)) {
		state := "not running"
		if sb, gerr := m.Get(ctx, id); gerr == nil {
			state = sb.State
			if r := sb.Restarts.Refused; r != "" {
				state += "; boxd does not restart it: " + r
			}
		}
		return fmt.Errorf("sandbox %s is %s: %w", id, state, errdefs.ErrFailedPrecondition)
	}
	return err
}

// ExecRequest is a command to run in a sandbox.
type ExecRequest = wire.ExecRequest

// ExecResult is a finished command's status.
type ExecResult = wire.ExecResult

// Exec runs a command in a sandbox, streaming its output to stdout and
// stderr. stdin may be nil.
func (m *Manager) Exec(ctx context.Context, idOrName string, req ExecRequest, stdin io.Reader, stdout, stderr io.Writer) (ExecResult, error) {
	return m.ExecWithin(ctx, idOrName, req, 0, stdin, stdout, stderr)
}

// ExecWithin is Exec with the output cap, after the sandbox's default is
// applied, held to at most maxOutput bytes (0: no such bound), for callers
// that buffer the output.
func (m *Manager) ExecWithin(ctx context.Context, idOrName string, req ExecRequest, maxOutput int64, stdin io.Reader, stdout, stderr io.Writer) (ExecResult, error) {
	if len(req.Args) == 0 {
		return ExecResult{}, fieldErr("args", "no command given")
	}
	for i, a := range req.Args {
		if len(a) > 128<<10 {
			return ExecResult{}, fieldErr("args", "argument %d is longer than 128 KiB", i)
		}
	}
	if req.Args[0] == "" {
		return ExecResult{}, fieldErr("args", "the command name is empty")
	}
	if err := ValidateEnv("env", req.Env); err != nil {
		return ExecResult{}, err
	}
	if err := ValidateWorkdir("workdir", req.Dir); err != nil {
		return ExecResult{}, err
	}
	if req.OutputLimit < 0 {
		return ExecResult{}, fieldErr("output_limit", "%d must not be negative", req.OutputLimit)
	}
	if err := ValidateUser("user", req.User); err != nil {
		return ExecResult{}, err
	}
	c, id, err := m.agentFor(ctx, idOrName)
	if err != nil {
		return ExecResult{}, err
	}
	m.execStarted(id, req.Args)
	if req.Timeout == 0 || req.OutputLimit == 0 {
		d := m.execDefaults(ctx, id)
		if req.Timeout == 0 {
			req.Timeout = d.ExecTimeout
		}
		if req.OutputLimit == 0 {
			req.OutputLimit = d.OutputLimit
		}
	}
	if maxOutput > 0 && (req.OutputLimit == 0 || req.OutputLimit > maxOutput) {
		req.OutputLimit = maxOutput
	}
	before, beforeOK := m.oomKills(id)
	res, err := c.Exec(ctx, req, stdin, stdout, stderr)
	m.execExited(id, res, err)
	if err != nil {
		return res, m.notRunning(ctx, id, fmt.Errorf("exec in sandbox %s: %w", id, err))
	}
	m.markOOM(id, before, beforeOK, &res)
	return res, nil
}

// execDefaults is a sandbox's default exec timeout and output cap, cached
// after the first look at its label (they change only by update, which
// refreshes the cache).
func (m *Manager) execDefaults(ctx context.Context, id string) Tunables {
	if v, ok := m.execDefs.Load(id); ok {
		return v.(Tunables)
	}
	ctx = namespaces.WithNamespace(ctx, m.cfg.Namespace)
	ctr, err := m.cfg.Client.LoadContainer(ctx, id)
	if err != nil {
		return Tunables{}
	}
	labels, err := ctr.Labels(ctx)
	if err != nil {
		return Tunables{}
	}
	var rec record
	if json.Unmarshal([]byte(labels[LabelSandbox]), &rec) != nil {
		return Tunables{}
	}
	d := Tunables{ExecTimeout: rec.ExecTimeout, OutputLimit: rec.OutputLimit}
	m.execDefs.Store(id, d)
	return d
}

// CopyIn extracts a tar stream at dest inside the sandbox (docker cp rules:
// into dest if it is a directory, else as dest).
func (m *Manager) CopyIn(ctx context.Context, idOrName, dest string, tarStream io.Reader) error {
	if err := ValidateWorkdir("path", dest); err != nil {
		return err
	}
	if dest == "" {
		return fieldErr("path", "destination path is empty")
	}
	c, id, err := m.agentFor(ctx, idOrName)
	if err != nil {
		return err
	}
	if err := c.CopyIn(ctx, dest, tarStream); err != nil {
		return m.notRunning(ctx, id, fmt.Errorf("copy into sandbox %s:%s: %w", id, dest, err))
	}
	return nil
}

// CopyOut writes a tar of path inside the sandbox to w.
func (m *Manager) CopyOut(ctx context.Context, idOrName, path string, w io.Writer) error {
	if err := ValidateWorkdir("path", path); err != nil {
		return err
	}
	if path == "" {
		return fieldErr("path", "source path is empty")
	}
	c, id, err := m.agentFor(ctx, idOrName)
	if err != nil {
		return err
	}
	if err := c.CopyOut(ctx, path, w); err != nil {
		return m.notRunning(ctx, id, fmt.Errorf("copy from sandbox %s:%s: %w", id, path, err))
	}
	return nil
}

// Stat describes one path inside the sandbox without following a final
// symlink.
func (m *Manager) Stat(ctx context.Context, idOrName, path string) (wire.FileInfo, error) {
	if err := ValidateWorkdir("path", path); err != nil {
		return wire.FileInfo{}, err
	}
	if path == "" {
		return wire.FileInfo{}, fieldErr("path", "path is empty")
	}
	c, id, err := m.agentFor(ctx, idOrName)
	if err != nil {
		return wire.FileInfo{}, err
	}
	fi, err := c.Stat(ctx, path)
	if err != nil {
		return fi, m.notRunning(ctx, id, fmt.Errorf("stat in sandbox %s:%s: %w", id, path, err))
	}
	return fi, nil
}
