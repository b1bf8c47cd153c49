//go:build linux

// Room: network. Published ports: listeners on the host, joined through
// the init to the sandbox's own loopback.

package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"

	"github.com/boxd-dev/boxd/internal/events"
	"github.com/boxd-dev/boxd/network/ports"
)

// LabelPorts holds a sandbox's published ports (JSON list of
// ports.Mapping), so a restarted boxd listens on them again.
const LabelPorts = "boxd.io/ports"

// MaxPublish bounds the ports one sandbox may publish (and keeps the label
// well under containerd's 4 KiB).
const MaxPublish = 32

// PortSpec is one port a create or PublishPort asks for; zero values take
// defaults (host 127.0.0.1, a free host port, tcp).
type PortSpec = ports.Mapping

// portsMu serialises changes of published ports (label read-modify-write);
// publishing is rare, so one lock for all sandboxes is enough.
var portsMu sync.Mutex

// normalizePorts validates a request's publish list; field is its name.
func (m *Manager) normalizePorts(field string, specs []PortSpec) ([]PortSpec, error) {
	if len(specs) > MaxPublish {
		return nil, fieldErr(field, "%d ports, at most %d allowed", len(specs), MaxPublish)
	}
	out := make([]PortSpec, 0, len(specs))
	for i, s := range specs {
		n, err := m.cfg.Ports.Normalize(s)
		if err != nil {
			return nil, portFieldErr(fmt.Sprintf("%s[%d]", field, i), err)
		}
		for j, o := range out {
			if n.HostPort != 0 && o.HostIP == n.HostIP && o.HostPort == n.HostPort {
				return nil, fieldErr(fmt.Sprintf("%s[%d].host_port", field, i), "%s is also asked for by %s[%d]", n.HostAddr(), field, j)
			}
		}
		out = append(out, n)
	}
	return out, nil
}

func portFieldErr(prefix string, err error) error {
	var fe *ports.FieldError
	if errors.As(err, &fe) {
		return fieldErr(prefix+"."+fe.Field, "%s", fe.Msg)
	}
	return err
}

// bindPorts listens on every spec for ctx's caller (before the sandbox
// exists, so a port in use fails the create before anything is made). It
// is the one place every path that publishes listens through, so the
// privileged-port check lives here. On error nothing is left listening.
// field names the list in errors ("" for a single port).
func bindPorts(ctx context.Context, field string, specs []PortSpec) ([]*ports.Listener, error) {
	prefix := func(i int) string {
		if field == "" {
			return ""
		}
		return fmt.Sprintf("%s[%d].", field, i)
	}
	specs = slices.Clone(specs)
	for i := range specs {
		var err error
		if specs[i], err = mayListen(ctx, prefix(i), specs[i]); err != nil {
			return nil, err
		}
	}
	var lns []*ports.Listener
	for i, s := range specs {
		l, err := ports.Bind(s)
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return nil, fmt.Errorf("%s%s: %w", prefix(i), ports.BindField(err), err)
		}
		lns = append(lns, l)
	}
	return lns, nil
}

// checkPublish is mayListen for a create's ports, before anything of the
// sandbox is made (bindPorts checks again when it listens).
func checkPublish(ctx context.Context, specs []PortSpec) error {
	for i, s := range specs {
		if _, err := mayListen(ctx, fmt.Sprintf("publish[%d].", i), s); err != nil {
			return err
		}
	}
	return nil
}

// mayListen refuses a host port below net.ipv4.ip_unprivileged_port_start
// (read now) to a caller that is not an admin: the caller could not bind
// it itself, and a root-owned listener there could stand in for a host
// service (while it restarts, say). Port 0 (any free port) is fine. An
// admin's such port is marked so a restarted boxd listens on it again.
func mayListen(ctx context.Context, prefix string, s PortSpec) (PortSpec, error) {
	s.Admin = false
	start := ports.UnprivilegedPortStart()
	if s.HostPort == 0 || s.HostPort >= start {
		return s, nil
	}
	if c, ok := CallerFrom(ctx); ok && !c.Admin {
		return s, fmt.Errorf("%shost_port: %d is below net.ipv4.ip_unprivileged_port_start (%d): only root and --admin-group members may publish it: %w",
			prefix, s.HostPort, start, errdefs.ErrPermissionDenied)
	}
	s.Admin = true
	return s, nil
}

// dialerFor opens connections into sandbox id through its init. It dials
// the agent socket boxd made, whichever init holds it now (restarts keep
// the path), and waits out a restart in progress.
func (m *Manager) dialerFor(id string) ports.Dialer {
	return func(ctx context.Context, port int) (net.Conn, error) {
		m.awaitRelease(ctx, id, restartWait)
		return m.agent(id).Dial(ctx, port)
	}
}

func (m *Manager) servePorts(id string, lns []*ports.Listener) {
	for _, l := range lns {
		m.ports.Serve(id, l, m.dialerFor(id))
	}
}

func mappings(lns []*ports.Listener) []PortSpec {
	out := make([]PortSpec, 0, len(lns))
	for _, l := range lns {
		out = append(out, l.Mapping())
	}
	return out
}

func portsLabel(ms []PortSpec) string {
	if len(ms) == 0 {
		return ""
	}
	b, _ := json.Marshal(ms)
	return string(b)
}

func parsePorts(v string) []PortSpec {
	var ms []PortSpec
	if v != "" {
		_ = json.Unmarshal([]byte(v), &ms) // only boxd writes it
	}
	return ms
}

// PublishPort publishes spec on a running sandbox and returns the mapping
// with its host port. Asking again for a sandbox port already published on
// the same host address with any host port (HostPort 0) returns that
// mapping, so it doubles as a lookup.
func (m *Manager) PublishPort(ctx context.Context, idOrName string, spec PortSpec) (PortSpec, error) {
	n, err := m.cfg.Ports.Normalize(spec)
	if err != nil {
		var fe *ports.FieldError
		if errors.As(err, &fe) {
			return PortSpec{}, fieldErr(fe.Field, "%s", fe.Msg)
		}
		return PortSpec{}, err
	}
	ctr, err := m.find(ctx, idOrName)
	if err != nil {
		return PortSpec{}, err
	}
	id := ctr.ID()
	// The claim keeps a delete from running between the listen and the
	// label (it would leave a listener for a sandbox that is gone); it is
	// taken before portsMu, in the order relistenAll takes them.
	if !m.claimWait(ctx, id, 5*time.Second) {
		return PortSpec{}, fmt.Errorf("sandbox %s is being created, restarted or deleted: %w", id, errdefs.ErrConflict)
	}
	defer m.release(id)
	portsMu.Lock()
	defer portsMu.Unlock()
	labels, err := ctr.Labels(ctx)
	if err != nil {
		return PortSpec{}, fmt.Errorf("publish on %s: %w", id, err)
	}
	cur := parsePorts(labels[LabelPorts])
	// A mapping boxd gave up on (Down) is published again in its place,
	// unless a live one matches too.
	again := -1
	for i, c := range cur {
		if c.HostIP == n.HostIP && c.Port == n.Port && c.Protocol == n.Protocol && (n.HostPort == 0 || n.HostPort == c.HostPort) {
			if c.Down == "" {
				return c, nil
			}
			if again < 0 {
				again = i
			}
		}
	}
	if again < 0 && len(cur) >= MaxPublish {
		return PortSpec{}, fmt.Errorf("port: sandbox %s already publishes %d ports, the most allowed: %w", id, MaxPublish, errdefs.ErrResourceExhausted)
	}
	lns, err := bindPorts(ctx, "", []PortSpec{n})
	if err != nil {
		return PortSpec{}, err
	}
	got := lns[0].Mapping()
	next := append(slices.Clone(cur), got)
	if again >= 0 {
		next = slices.Clone(cur)
		next[again] = got
	}
	if _, err := ctr.SetLabels(ctx, map[string]string{LabelPorts: portsLabel(next)}); err != nil {
		lns[0].Close()
		return PortSpec{}, fmt.Errorf("publish on %s: record: %w", id, err)
	}
	if again >= 0 {
		m.ports.Forget(id, cur[again].Same)
	}
	m.servePorts(id, lns)
	m.log.Info("port published", "sandbox", id, "port", got.String())
	return got, nil
}

// UnpublishPort stops the published ports of a sandbox that match: its
// sandbox port (port) and/or host port (hostPort); 0 matches any, but not
// both may be 0. It returns what it stopped; nothing matching is not_found.
func (m *Manager) UnpublishPort(ctx context.Context, idOrName string, port, hostPort int) ([]PortSpec, error) {
	if port == 0 && hostPort == 0 {
		return nil, fieldErr("port", "name the sandbox port or the host port to unpublish")
	}
	if port < 0 || port > 65535 {
		return nil, fieldErr("port", "%d is outside 1-65535", port)
	}
	if hostPort < 0 || hostPort > 65535 {
		return nil, fieldErr("host_port", "%d is outside 1-65535", hostPort)
	}
	ctr, err := m.find(ctx, idOrName)
	if err != nil {
		return nil, err
	}
	id := ctr.ID()
	portsMu.Lock()
	defer portsMu.Unlock()
	labels, err := ctr.Labels(ctx)
	if err != nil {
		return nil, fmt.Errorf("unpublish on %s: %w", id, err)
	}
	match := func(c PortSpec) bool {
		return (port == 0 || c.Port == port) && (hostPort == 0 || c.HostPort == hostPort)
	}
	cur := parsePorts(labels[LabelPorts])
	keep := slices.DeleteFunc(slices.Clone(cur), match)
	if len(keep) == len(cur) {
		return nil, fmt.Errorf("sandbox %s publishes no such port: %w", id, errdefs.ErrNotFound)
	}
	if _, err := ctr.SetLabels(ctx, map[string]string{LabelPorts: portsLabel(keep)}); err != nil {
		return nil, fmt.Errorf("unpublish on %s: record: %w", id, err)
	}
	gone := m.ports.Release(id, match)
	m.ports.Forget(id, match)
	m.log.Info("port unpublished", "sandbox", id, "ports", gone)
	return slices.DeleteFunc(cur, func(c PortSpec) bool { return !match(c) }), nil
}

// relistenPorts listens again on the ports a sandbox's labels record
// (boxd's own record: user labels cannot name it) and that boxd does not
// serve now: after a boxd restart. A port that cannot be listened on (in
// use, no longer allowed by the daemon's settings, privileged and not an
// admin's) is marked down in the record, with an event, and never tried
// again by boxd: retrying could take the port from whatever holds it when
// that restarts. Publishing it again does.
func (m *Manager) relistenPorts(ctx context.Context, ctr client.Container, labels map[string]string) {
	want := parsePorts(labels[LabelPorts])
	if len(want) == 0 {
		return
	}
	id := ctr.ID()
	have := m.ports.Published(id)
	owner := ownerOf(labels)
	downs := 0
	for i, w := range want {
		if w.Down != "" || slices.ContainsFunc(have, w.Same) || m.ports.GaveUp(id, w) {
			continue
		}
		l, down, err := m.relistenOne(owner, w)
		if err != nil {
			want[i].Down = down
			downs++
			m.ports.GiveUp(id, w)
			m.log.Warn("published port: cannot listen again; it stays unpublished (not retried)", "sandbox", id, "port", w.String(), "reason", down, "err", err)
			m.emit(events.PortUnpublished, id, map[string]string{"host_addr": w.HostAddr(), "port": strconv.Itoa(w.Port),
				"reason": down, "error": truncate(err.Error(), 256)})
			continue
		}
		m.ports.Serve(id, l, m.dialerFor(id))
		m.log.Info("published port listening again", "sandbox", id, "port", w.String())
	}
	if downs == 0 {
		return
	}
	if _, err := ctr.SetLabels(ctx, map[string]string{LabelPorts: portsLabel(want)}); err != nil {
		m.log.Error("published port: record it as down", "sandbox", id, "err", err)
	}
}

// relistenOne listens on a recorded mapping again, for a sandbox owned by
// owner; on failure down says why (a ports.Down* reason).
func (m *Manager) relistenOne(owner uint32, w PortSpec) (*ports.Listener, string, error) {
	if _, err := m.cfg.Ports.Normalize(w); err != nil || w.HostPort == 0 {
		return nil, ports.DownNotAllowed, fmt.Errorf("not allowed by this daemon's settings: %v", err)
	}
	// A port below the unprivileged start is listened on again only if an
	// admin published it (or the owner is root): a record from a boxd that
	// did not check gains a non-admin nothing.
	if start := ports.UnprivilegedPortStart(); w.HostPort < start && !w.Admin && owner != 0 {
		return nil, ports.DownPrivileged, fmt.Errorf("host port %d is below net.ipv4.ip_unprivileged_port_start (%d) and was not published by an admin: %w", w.HostPort, start, errdefs.ErrPermissionDenied)
	}
	l, err := ports.Bind(w)
	if err != nil {
		if ports.InUse(err) {
			return nil, ports.DownInUse, err
		}
		return nil, ports.DownFailed, err
	}
	return l, "", nil
}

// relistenAll is relistenPorts for every client-visible sandbox.
func (m *Manager) relistenAll(ctx context.Context) {
	ctx = namespaces.WithNamespace(ctx, m.cfg.Namespace)
	ctrs, err := m.cfg.Client.Containers(ctx, fmt.Sprintf(`labels."%s"==true,labels."%s"`, LabelManaged, LabelPorts))
	if err != nil {
		m.log.Warn("published ports: list sandboxes", "err", err)
		return
	}
	for _, ctr := range ctrs {
		// A sandbox being created serves its own listeners once ready; one
		// being deleted must not get them back.
		if !m.claim(ctr.ID()) {
			continue
		}
		portsMu.Lock()
		if labels, err := ctr.Labels(ctx); err == nil {
			m.relistenPorts(ctx, ctr, labels)
		}
		portsMu.Unlock()
		m.release(ctr.ID())
	}
}
