//go:build linux

// Room: volumes. Host directories a sandbox mounts (create --bind): each
// checked for its caller beneath the roots the admin allows and opened
// with the caller's credentials (internal/bindroot), mounted by boxd
// from that open directory at <state-dir>/binds/<id>/<n>, and from there
// bind-mounted into the sandbox ID-mapped, so that the sandbox's root
// reads and writes as the caller's own uid and gid on the host and no
// other id of the sandbox's reaches the files. Unmounted when the sandbox
// is deleted; mounted again (checked again) if a restarted host lost them.

package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/boxd-dev/boxd/internal/bindroot"
)

// Bounds on binds: the record that stores them is a containerd label of
// at most 4 KiB.
const (
	MaxSandboxBinds = 8
	maxBindPath     = 512
	maxBindGroups   = 64
)

// bindMount is a host directory bind as a sandbox's record stores it.
type bindMount struct {
	Source   string `json:"source"` // host path, as the caller gave it
	Path     string `json:"path"`   // inside the sandbox
	ReadOnly bool   `json:"ro,omitempty"`
	NoExec   bool   `json:"noexec,omitempty"`
}

// bindCreds are the caller a sandbox's binds were checked for: checked
// again with them if a bind has to be mounted again.
type bindCreds struct {
	UID    uint32   `json:"uid"`
	GID    uint32   `json:"gid"`
	Groups []uint32 `json:"groups,omitempty"`
}

func (c *bindCreds) creds() bindroot.Creds {
	return bindroot.Creds{UID: c.UID, GID: c.GID, Groups: c.Groups}
}

// SandboxBind is one host directory a sandbox mounts, as inspect shows it.
type SandboxBind struct {
	Source   string
	Path     string
	ReadOnly bool
	NoExec   bool
}

func sandboxBinds(bms []bindMount) []SandboxBind {
	var out []SandboxBind
	for _, b := range bms {
		out = append(out, SandboxBind(b))
	}
	return out
}

// bindsDenied is the refusal of a create's binds as a whole.
func bindsDenied(p, format string, args ...any) error {
	return fmt.Errorf("binds[0]: %q: %s: %w", p, fmt.Sprintf(format, args...), errdefs.ErrPermissionDenied)
}

// parseBinds checks a create's binds for ctx's caller: their form, their
// paths in the sandbox (none on another's, a volume's included), and each
// host directory (opened as the caller would, then closed: mountBinds
// opens it again and mounts what it opened). Nothing is held.
func (m *Manager) parseBinds(ctx context.Context, r resolved, specList []string) ([]bindMount, *bindCreds, error) {
	if len(specList) == 0 {
		return nil, nil, nil
	}
	if len(specList) > MaxSandboxBinds {
		return nil, nil, fieldErr("binds", "%d binds, at most %d allowed", len(specList), MaxSandboxBinds)
	}
	if len(m.cfg.BindRoots) == 0 {
		b, _ := bindroot.Parse(specList[0])
		return nil, nil, bindsDenied(b.Source, "this boxd allows no host directories (boxd --allow-bind)")
	}
	c, ok := CallerFrom(ctx)
	if !ok || !c.GIDKnown {
		return nil, nil, fmt.Errorf("binds: boxd does not know the caller's groups to check the host paths with: %w", errdefs.ErrPermissionDenied)
	}
	if len(c.Groups) > maxBindGroups {
		return nil, nil, fmt.Errorf("binds: the caller is in %d groups, at most %d can be recorded: %w", len(c.Groups), maxBindGroups, errdefs.ErrFailedPrecondition)
	}
	if r.runtime == RuntimeGvisor {
		return nil, nil, fmt.Errorf("binds: gVisor sandboxes cannot mount host directories (their mounts are not ID-mapped): use runtime runc: %w", errdefs.ErrFailedPrecondition)
	}
	cr := &bindCreds{UID: c.UID, GID: c.GID, Groups: c.Groups}
	taken := map[string]bool{}
	for _, vm := range r.volumes {
		taken[vm.Path] = true
	}
	var out []bindMount
	for i, s := range specList {
		field := fmt.Sprintf("binds[%d]", i)
		b, err := bindroot.Parse(s)
		if err != nil {
			return nil, nil, fieldErr(field, "%v", err)
		}
		if len(b.Source) > maxBindPath || len(b.Target) > maxBindPath {
			return nil, nil, fieldErr(field, "%q: paths are at most %d bytes", s, maxBindPath)
		}
		if err := checkMountPath(field, s, b.Target); err != nil {
			return nil, nil, err
		}
		if taken[b.Target] {
			return nil, nil, fieldErr(field, "%q: something else is mounted at %s", s, b.Target)
		}
		taken[b.Target] = true
		f, err := bindroot.Open(m.cfg.BindRoots, cr.creds(), b.Source)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", field, err)
		}
		f.Close()
		out = append(out, bindMount{Source: b.Source, Path: b.Target, ReadOnly: b.ReadOnly, NoExec: b.NoExec})
	}
	return out, cr, nil
}

// bindDir holds sandbox id's bind mounts on the host (host root's, 0700).
func (m *Manager) bindDir(id string) string { return filepath.Join(m.cfg.StateDir, "binds", id) }

func (m *Manager) bindTarget(id string, i int) string {
	return filepath.Join(m.bindDir(id), strconv.Itoa(i))
}

// mountBind opens bind i of sandbox id as cr and mounts what it opened.
func (m *Manager) mountBind(cr *bindCreds, id string, i int, b bindMount) error {
	f, err := bindroot.Open(m.cfg.BindRoots, cr.creds(), b.Source)
	if err != nil {
		return fmt.Errorf("binds[%d]: %w", i, err)
	}
	defer f.Close()
	if err := bindroot.Mount(f, m.bindTarget(id, i), b.ReadOnly, b.NoExec); err != nil {
		return fmt.Errorf("binds[%d]: %w", i, err)
	}
	return nil
}

// mountBinds mounts a new sandbox's binds on the host, the sources of
// its spec's mounts; a failed create unmounts them.
func (c *creation) mountBinds() error {
	if len(c.r.binds) == 0 {
		return nil
	}
	m := c.m
	c.onFail(func(context.Context) { m.unmountBinds(c.id) })
	if err := os.MkdirAll(m.bindDir(c.id), 0o700); err != nil {
		return fmt.Errorf("binds: %w", err)
	}
	for i, b := range c.r.binds {
		if err := m.mountBind(c.r.bindCreds, c.id, i, b); err != nil {
			return err
		}
	}
	c.phase("binds")
	return nil
}

// bindSpecMounts are a sandbox's binds as spec mounts: ID-mapped so the
// caller's uid and gid on the host are the sandbox root's (one id each:
// files of any other owner show as the overflow id, and no other uid of
// the sandbox can create files there), nosuid, nodev.
func (m *Manager) bindSpecMounts(id string, bms []bindMount, cr *bindCreds, hostID uint32) []specs.Mount {
	var out []specs.Mount
	for i, b := range bms {
		opts := []string{}
		if b.NoExec {
			opts = append(opts, "noexec")
		}
		out = append(out, idMappedBind(m.bindTarget(id, i), b.Path, b.ReadOnly, cr.UID, cr.GID, hostID, 1, opts...))
	}
	return out
}

// unmountBinds detaches sandbox id's binds from the host and removes
// their directories (never recursively: the caller's files stay).
func (m *Manager) unmountBinds(id string) {
	dir := m.bindDir(id)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	for _, e := range ents {
		if err := bindroot.Unmount(filepath.Join(dir, e.Name())); err != nil {
			m.log.Error("unmount a bind", "sandbox", id, "err", err)
		}
	}
	if err := unix.Rmdir(dir); err != nil && !errors.Is(err, unix.ENOENT) {
		m.log.Error("remove a sandbox's bind directory", "sandbox", id, "err", err)
	}
}

// ensureBinds mounts a sandbox's binds again where the host lost them
// (a reboot), checked again with the credentials of its create, before
// a new init starts: the init must never get the bare directory.
func (m *Manager) ensureBinds(ctx context.Context, ctr client.Container) error {
	info, err := ctr.Info(ctx, client.WithoutRefreshedMetadata)
	if err != nil {
		return err
	}
	var rec record
	if json.Unmarshal([]byte(info.Labels[LabelSandbox]), &rec) != nil || len(rec.Binds) == 0 || rec.BindCreds == nil {
		return nil
	}
	if err := os.MkdirAll(m.bindDir(ctr.ID()), 0o700); err != nil {
		return fmt.Errorf("binds: %w", err)
	}
	for i, b := range rec.Binds {
		if bindroot.Mounted(m.bindTarget(ctr.ID(), i)) {
			continue
		}
		m.log.Info("mounting the sandbox's bind again", "sandbox", ctr.ID(), "source", b.Source)
		if err := m.mountBind(rec.BindCreds, ctr.ID(), i, b); err != nil {
			return err
		}
	}
	return nil
}

// pruneBinds unmounts the binds of sandboxes that are gone (a boxd that
// died while deleting one). Load calls it.
func (m *Manager) pruneBinds(ctrs []containers.Container) {
	ents, err := os.ReadDir(filepath.Join(m.cfg.StateDir, "binds"))
	if err != nil {
		return
	}
	present := map[string]bool{}
	for _, c := range ctrs {
		present[c.ID] = true
	}
	for _, e := range ents {
		if !present[e.Name()] {
			m.unmountBinds(e.Name())
		}
	}
}

// refuseForkBinds refuses to fork a sandbox that mounts host
// directories: the fork's caller need not be the one the binds were
// checked for, and a fork without them would hide what its programs
// expect there.
func refuseForkBinds(source string, sb *Sandbox) error {
	if len(sb.Binds) == 0 {
		return nil
	}
	return fmt.Errorf("sandbox %s mounts host directories (%s): a fork does not carry binds: %w", source, sb.Binds[0].Path, errdefs.ErrFailedPrecondition)
}
