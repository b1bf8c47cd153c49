// Room: shared. The OCI runtimes a sandbox runs on (runc, gVisor), and
// the client of a sandbox's init that every room talks to it through.

package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"

	"github.com/boxd-dev/boxd/agent/gvchannel"
	"github.com/boxd-dev/boxd/agent/handoff"
	"github.com/boxd-dev/boxd/agent/host"
	"github.com/boxd-dev/boxd/internal/gvisor"
	"github.com/boxd-dev/boxd/network"
)

// The OCI runtimes a sandbox can run on (CreateRequest.Runtime).
const (
	RuntimeRunc   = "runc"
	RuntimeGvisor = gvisor.Name
)

// Gvisor is the gVisor installation boxd found at start.
type Gvisor struct {
	Info gvisor.Info
	// ConfigPath is the shim's options file (gvisor.WriteConfig).
	ConfigPath string
	// EgressConfigPath is egress sandboxes' (gvisor.WriteEgressConfig);
	// "" refuses egress under gVisor.
	EgressConfigPath string
	// Root is runsc's state root in that file (the shim adds the
	// containerd namespace).
	Root string
}

// ParseRuntime checks a runtime name given to field (a flag or a request
// field); "" is returned as is.
func ParseRuntime(field, name string) (string, error) {
	switch name {
	case "", RuntimeRunc, RuntimeGvisor:
		return name, nil
	}
	return "", fieldErr(field, "unknown runtime %q: runc or gvisor", name)
}

// pickRuntime resolves a request's runtime: its own, else the daemon's
// default, else runc. gVisor must be installed.
func (m *Manager) pickRuntime(name string) (string, error) {
	name, err := ParseRuntime("runtime", name)
	if err != nil {
		return "", err
	}
	if name == "" {
		name = m.cfg.DefaultRuntime
	}
	if name == "" {
		name = RuntimeRunc
	}
	if name == RuntimeGvisor && m.cfg.Gvisor == nil {
		why := m.cfg.GvisorErr
		if why == "" {
			why = "boxd was started without it"
		}
		return "", fmt.Errorf("runtime: gvisor is not available on this host (%s): %w", why, errdefs.ErrFailedPrecondition)
	}
	return name, nil
}

// containerRuntime is the containerd runtime (shim and its options) of a
// new sandbox on runtime name.
func (m *Manager) containerRuntime(name, netMode string) client.NewContainerOpts {
	if name == RuntimeGvisor {
		// The shim's absolute path is the runtime: containerd starts it
		// as it is, so neither its configuration nor its PATH must name
		// gVisor.
		cfg := m.cfg.Gvisor.ConfigPath
		if netMode == network.ModeEgress {
			cfg = m.cfg.Gvisor.EgressConfigPath
		}
		return client.WithRuntime(m.cfg.Gvisor.Info.Shim, gvisor.Options(cfg))
	}
	return client.WithRuntime(m.cfg.Runtime, runtimeOptions(m.cfg.Runc))
}

// withRuntime records the runtime a sandbox is made on (rec.Runtime, empty
// for runc) and its version.
func (m *Manager) withRuntime(rec record) record {
	if rec.Runtime == RuntimeGvisor {
		rec.RuntimeVersion, rec.RuntimeAdvisories = m.cfg.Gvisor.Info.Version, nil
		return rec
	}
	rec.Runtime, rec.RuntimeVersion, rec.RuntimeAdvisories = RuntimeRunc, m.cfg.RuntimeVersion, m.cfg.RuntimeAdvisories
	return rec
}

// gvAgentDir is the host directory a gVisor sandbox's init binds its
// agent socket in (agent/gvchannel), and gvPinPath the file that pins
// that socket: both in the sandbox's host-root-only directory. A runc
// sandbox has neither.
func (m *Manager) gvAgentDir(id string) string { return filepath.Join(m.sandboxDir(id), "g") }
func (m *Manager) gvPinPath(id string) string  { return filepath.Join(m.sandboxDir(id), "agent.pin") }

// gvAgentDirFor is the spec's AgentDir for a sandbox on runtime: empty
// unless gVisor.
func (m *Manager) gvAgentDirFor(id, runtime string) string {
	if runtime != RuntimeGvisor {
		return ""
	}
	return m.gvAgentDir(id)
}

// isGvisor reports whether sandbox id runs on gVisor: its agent directory
// exists (boxd makes it, in a directory only host root can write, for
// gVisor sandboxes only), so no containerd round trip is needed, also
// after a restart of boxd.
func (m *Manager) isGvisor(id string) bool {
	fi, err := os.Lstat(m.gvAgentDir(id))
	return err == nil && fi.IsDir()
}

// agent is the channel to sandbox id's init: under runc the agent socket
// boxd made, dialled by its host path; under gVisor the pinned socket the
// init bound (agent/gvchannel), opened without following anything.
func (m *Manager) agent(id string) *host.Client {
	if !m.isGvisor(id) {
		return host.NewClient(m.socketPath(id))
	}
	dir, pinPath := m.gvAgentDir(id), m.gvPinPath(id)
	return host.NewDialClient(func(ctx context.Context) (net.Conn, error) {
		pin, err := gvchannel.ReadPin(pinPath)
		if err != nil {
			return nil, err
		}
		if pin.UID == 0 {
			// A pin written before boxd kept the owner in it: the
			// sandbox's record names its uid block. Never the agent
			// directory's owner, which the sandbox's root can change.
			uid, err := m.recordedRootUID(ctx, id)
			if err != nil {
				return nil, err
			}
			pin = pin.WithUID(uid)
		}
		return gvchannel.Dial(ctx, dir, pin)
	})
}

// recordedRootUID is the host uid of sandbox id's root as its label
// records it (the first id of its uid block).
func (m *Manager) recordedRootUID(ctx context.Context, id string) (uint32, error) {
	ctx = namespaces.WithNamespace(ctx, m.cfg.Namespace)
	ctr, err := m.cfg.Client.LoadContainer(ctx, id)
	if err != nil {
		return 0, fmt.Errorf("sandbox %s: %w", id, err)
	}
	labels, err := ctr.Labels(ctx)
	if err != nil {
		return 0, fmt.Errorf("sandbox %s: labels: %w", id, err)
	}
	var rec record
	if err := json.Unmarshal([]byte(labels[LabelSandbox]), &rec); err != nil || rec.HostUID == 0 {
		return 0, fmt.Errorf("sandbox %s: no uid block in its %s label (%v)", id, LabelSandbox, err)
	}
	return rec.HostUID, nil
}

// agentReady reports whether sandbox id's init has a channel boxd can
// reach (the exec fast path's check).
func (m *Manager) agentReady(id string) bool {
	p := m.socketPath(id)
	if m.isGvisor(id) {
		p = m.gvPinPath(id)
	}
	_, err := os.Stat(p)
	return err == nil
}

// gvPrepare readies a gVisor sandbox's channel before its init starts:
// the agent directory, emptied of a previous init's socket and pin, and
// the init's Config in the hand-off directory.
func (m *Manager) gvPrepare(id string, cfg handoff.Config, uid, gid uint32) error {
	body, err := cfg.Encode()
	if err != nil {
		return err
	}
	if err := gvchannel.Prepare(m.gvAgentDir(id), m.gvPinPath(id), int(uid), int(gid)); err != nil {
		return err
	}
	return gvchannel.WriteConfig(m.handoffDir(id), body, int(uid), int(gid))
}

// gvPinInit waits for a gVisor sandbox's new init to bind its agent
// socket and pins that socket. Nothing else runs in the sandbox until boxd
// has talked to this init, so the first socket of the sandbox root's
// there is the init's. uid is the sandbox root's host uid from boxd's
// record (the spec's uid map is made from it); the pin keeps it.
func (m *Manager) gvPinInit(ctx context.Context, id string, task client.Task, uid uint32, deadline time.Time) error {
	for delay := time.Millisecond; ; {
		pin, err := gvchannel.Find(m.gvAgentDir(id), uid)
		if err == nil {
			return gvchannel.WritePin(m.gvPinPath(id), pin)
		}
		if errors.Is(err, gvchannel.ErrRefused) {
			return err
		}
		if exited := m.initExited(ctx, id, task); exited != nil {
			return exited
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("init did not bind its agent socket within %s: %w", m.cfg.ReadyTimeout, err)
		}
		time.Sleep(delay)
		if delay < 20*time.Millisecond {
			delay *= 2
		}
	}
}

// gvRefuse is the error of an operation gVisor sandboxes do not offer.
func gvRefuse(op, why string) error {
	return fmt.Errorf("%s is not offered for gvisor sandboxes (%s): %w", op, why, errdefs.ErrFailedPrecondition)
}

// gvNoHostLayer says why commit and fork refuse gVisor sandboxes: runsc
// keeps a sandbox's root filesystem changes in its own overlay (runsc's
// default --overlay2 root:self), not in the containerd snapshot those read.
const gvNoHostLayer = "runsc keeps the root filesystem's changes in its own overlay, not in the snapshot boxd copies"

// gvLogFile is cio.LogFile for gVisor's shim, which takes its output
// paths as a FIFO's or a file's path, not a file:// URI: the init's
// output is appended to path (created here, host root's).
func gvLogFile(path string) (cio.Creator, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("init log: %w", err)
	}
	f.Close()
	return func(string) (cio.IO, error) {
		return plainIO{cio.Config{Stdout: path, Stderr: path}}, nil
	}, nil
}

// plainIO is a task's I/O that the shim writes itself: nothing to copy,
// wait for or close on boxd's side.
type plainIO struct{ cfg cio.Config }

func (p plainIO) Config() cio.Config { return p.cfg }
func (plainIO) Cancel()              {}
func (plainIO) Wait()                {}
func (plainIO) Close() error         { return nil }
