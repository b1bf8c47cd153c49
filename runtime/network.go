// Room: network. Egress: a sandbox's network namespace, allowlist and
// its label; restored and collected when boxd starts and reconciles.

package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"

	"github.com/boxd-dev/boxd/network"
)

// LabelNetwork holds an egress sandbox's network (netState as JSON): what
// a restarted boxd re-derives its firewall rules and resolver from.
const LabelNetwork = "boxd.io/network"

// MaxAllow bounds a sandbox's allowlist (it lives in a 4 KiB label).
const MaxAllow = 32

// NetworkInfo is what inspect shows of a sandbox's network.
type NetworkInfo struct {
	Mode    string
	Allow   []string
	Addr    string
	Gateway string
	DNS     string
	Addr6   string // "" without IPv6
	// Secrets are the secrets the sandbox holds placeholders of: names,
	// variables and hosts, never values or placeholders.
	Secrets []SecretUse
}

// netState is the LabelNetwork label.
type netState struct {
	Mode  string   `json:"mode"`
	Allow []string `json:"allow,omitempty"`
	// Secrets are the secrets the sandbox holds placeholders of.
	Secrets []network.Brokered `json:"secrets,omitempty"`
	network.Attachment
}

// resolveNetwork validates the network part of a request.
func (m *Manager) resolveNetwork(req CreateRequest, r *resolved) error {
	switch req.Network {
	case "", network.ModeNone:
		r.network = network.ModeNone
		if len(req.Allow) > 0 {
			return fieldErr("network.allow", "needs network mode %q (the mode is %q)", network.ModeEgress, network.ModeNone)
		}
		return nil
	case network.ModeEgress:
		r.network = network.ModeEgress
	default:
		return fieldErr("network.mode", "%q is not a network mode (known: %s, %s)", req.Network, network.ModeNone, network.ModeEgress)
	}
	if len(req.Allow) > MaxAllow {
		return fieldErr("network.allow", "%d entries, at most %d allowed", len(req.Allow), MaxAllow)
	}
	allow, err := network.ParseAllow("network.allow", req.Allow)
	if err != nil {
		var fe *FieldError
		if errors.As(err, &fe) {
			return err
		}
		return &FieldError{Field: "network.allow", Msg: err.Error()}
	}
	if err := m.checkIPv6("network.allow", allow); err != nil {
		return err
	}
	r.allow = allow
	return nil
}

// checkIPv6 refuses IPv6 entries when boxd has no IPv6 egress
// (--bridge-subnet6): they could never be reached.
func (m *Manager) checkIPv6(field string, allow []network.Dest) error {
	if m.cfg.Network != nil && m.cfg.Network.IPv6() {
		return nil
	}
	for i, d := range allow {
		if d.IsIPv6() {
			return fieldErr(fmt.Sprintf("%s[%d]", field, i), "%s: an IPv6 destination, and this boxd's egress is IPv4 only (boxd --bridge-subnet6 turns IPv6 on)", d)
		}
	}
	return nil
}

// startNetwork starts making sandbox id's egress network in the
// background: its namespace (Prepare), then the attach (CNI, firewall), so
// that both overlap the container's and task's creation. The namespace's
// path and the gateway are known up front, so st can go into the spec at
// once. waitNS returns once the namespace exists (the task's creation joins
// it); wait returns the finished state and must be called before the task
// starts. The caller tears down on failure, after wait.
func (m *Manager) startNetwork(ctx context.Context, id string, r resolved) (st *netState, waitNS func() error, wait func() (*netState, error), _ error) {
	if r.network != network.ModeEgress {
		return nil, nil, nil, nil
	}
	if m.cfg.Network == nil {
		return nil, nil, nil, fmt.Errorf("network egress is not available in this boxd (%s): %w", m.cfg.NetworkErr, errdefs.ErrFailedPrecondition)
	}
	// What the host lacks fails the create here, before anything is made.
	if err := m.cfg.Network.CheckForwarding(); err != nil {
		return nil, nil, nil, err
	}
	if err := m.cfg.Network.CheckPlugins(); err != nil {
		return nil, nil, nil, err
	}
	gw := m.cfg.Network.Gateway()
	st = &netState{Mode: network.ModeEgress, Allow: network.Strings(r.allow), Attachment: network.Attachment{NetNS: m.cfg.Network.NetNSPath(id), Gateway: gw},
		Secrets: r.secrets}
	m.cfg.Network.SetSecrets(id, r.owner, r.secrets) // Teardown forgets them
	if err := m.writeResolvConf(id); err != nil {
		return st, nil, nil, err
	}
	type result struct {
		att *network.Attachment
		err error
	}
	nsDone := make(chan error, 1)
	done := make(chan result, 1)
	go func() {
		if _, err := m.cfg.Network.Prepare(id); err != nil {
			nsDone <- err
			done <- result{nil, err}
			return
		}
		nsDone <- nil
		att, err := m.cfg.Network.Attach(context.WithoutCancel(ctx), id, r.allow)
		done <- result{att, err}
	}()
	var nsErr error
	var nsOnce bool
	waitNS = func() error {
		if !nsOnce {
			nsErr, nsOnce = <-nsDone, true
		}
		return nsErr
	}
	var once *result
	wait = func() (*netState, error) {
		if once == nil {
			res := <-done
			once = &res
		}
		if once.err != nil {
			return nil, once.err
		}
		full := *st
		full.Attachment = *once.att
		return &full, nil
	}
	return st, waitNS, wait, nil
}

// memberNetwork makes an egress pool member's network as far as it can go
// before the member has an owner: its namespace (boxd's, empty but for
// loopback, as a cold create's) and resolv.conf, both where the spec
// names them. attachMember finishes it at hand-out. The caller tears
// down on failure.
func (m *Manager) memberNetwork(id string, r resolved) (*netState, error) {
	if r.network != network.ModeEgress {
		return nil, nil
	}
	if m.cfg.Network == nil {
		return nil, fmt.Errorf("network egress is not available in this boxd (%s): %w", m.cfg.NetworkErr, errdefs.ErrFailedPrecondition)
	}
	st := &netState{Mode: network.ModeEgress, Attachment: network.Attachment{NetNS: m.cfg.Network.NetNSPath(id), Gateway: m.cfg.Network.Gateway()}}
	if err := m.writeResolvConf(id); err != nil {
		return st, err
	}
	if _, err := m.cfg.Network.Prepare(id); err != nil {
		return st, err
	}
	return st, nil
}

// attachMember starts attaching an egress member's prepared namespace at
// hand-out (CNI, the allowlist's firewall rules, the resolver), as a cold
// create does before its init starts, in the background so that it
// overlaps the rest of the hand-out; wait returns the state its label
// stores (any number of times). Whatever the outcome, wait must be called
// before the member is destroyed, which tears down what was made.
func (m *Manager) attachMember(ctx context.Context, id string, r resolved) (wait func() (*netState, error)) {
	done := make(chan struct{})
	var st *netState
	var err error
	go func() {
		defer close(done)
		att, aerr := m.cfg.Network.Attach(context.WithoutCancel(ctx), id, r.allow)
		if aerr != nil {
			err = aerr
			return
		}
		st = &netState{Mode: network.ModeEgress, Allow: network.Strings(r.allow), Attachment: *att}
	}()
	return func() (*netState, error) {
		<-done
		return st, err
	}
}

// writeResolvConf writes the resolv.conf an egress sandbox's spec mounts:
// the resolver on the bridge's gateway.
func (m *Manager) writeResolvConf(id string) error {
	gw := m.cfg.Network.Gateway()
	if err := os.WriteFile(m.resolvConfPath(id), []byte(fmt.Sprintf("nameserver %s\noptions ndots:0\n", gw)), 0o644); err != nil {
		return fmt.Errorf("resolv.conf: %w", err)
	}
	return nil
}

func (m *Manager) resolvConfPath(id string) string {
	return filepath.Join(m.sandboxDir(id), "resolv.conf")
}

func (st *netState) label() string {
	b, _ := json.Marshal(st)
	return string(b)
}

func parseNetState(labels map[string]string) (*netState, error) {
	v, ok := labels[LabelNetwork]
	if !ok {
		return nil, nil
	}
	var st netState
	if err := json.Unmarshal([]byte(v), &st); err != nil {
		return nil, fmt.Errorf("corrupt %s label: %w", LabelNetwork, err)
	}
	return &st, nil
}

func (st *netState) info(gw string) *NetworkInfo {
	if st == nil {
		return &NetworkInfo{Mode: network.ModeNone}
	}
	info := &NetworkInfo{Mode: st.Mode, Allow: slices.Clone(st.Allow), Addr: st.Addr.String(), Gateway: st.Gateway.String(), DNS: gw,
		Secrets: secretUses(st.Secrets)}
	if st.Addr6.IsValid() {
		info.Addr6 = st.Addr6.String()
	}
	return info
}

// teardownNetwork releases sandbox id's network, if it has one.
func (m *Manager) teardownNetwork(ctx context.Context, id string) error {
	if m.cfg.Network == nil {
		return nil
	}
	return m.cfg.Network.Teardown(ctx, id)
}

// ChangeNetwork adds allow and removes deny from a running egress
// sandbox's allowlist, without a restart, and stores the result.
func (m *Manager) ChangeNetwork(ctx context.Context, idOrName string, allow, deny []string) (*NetworkInfo, error) {
	ctx = namespaces.WithNamespace(ctx, m.cfg.Namespace)
	add, err := network.ParseAllow("allow", allow)
	if err != nil {
		return nil, &FieldError{Field: "allow", Msg: err.Error()}
	}
	if err := m.checkIPv6("allow", add); err != nil {
		return nil, err
	}
	del, err := network.ParseAllow("deny", deny)
	if err != nil {
		return nil, &FieldError{Field: "deny", Msg: err.Error()}
	}
	ctr, err := m.find(ctx, idOrName)
	if err != nil {
		return nil, err
	}
	id := ctr.ID()
	if !m.claimWait(ctx, id, 5*time.Second) {
		return nil, fmt.Errorf("sandbox %s is being created, restarted or deleted: %w", id, errdefs.ErrConflict)
	}
	defer m.release(id)
	labels, err := ctr.Labels(ctx)
	if err != nil {
		return nil, err
	}
	st, err := parseNetState(labels)
	if err != nil {
		return nil, err
	}
	if st == nil || st.Mode != network.ModeEgress {
		return nil, fmt.Errorf("sandbox %s has network mode none; only an egress sandbox has an allowlist: %w", id, errdefs.ErrFailedPrecondition)
	}
	cur, err := network.ParseAllow("allow", st.Allow)
	if err != nil {
		return nil, err
	}
	next := mergeAllow(cur, add, del)
	if len(next) > MaxAllow {
		return nil, fieldErr("allow", "the allowlist would have %d entries, at most %d allowed", len(next), MaxAllow)
	}
	if m.cfg.Network == nil {
		return nil, fmt.Errorf("network egress is not available in this boxd (%s): %w", m.cfg.NetworkErr, errdefs.ErrFailedPrecondition)
	}
	if err := m.cfg.Network.SetAllow(id, next); err != nil {
		return nil, err
	}
	st.Allow = network.Strings(next)
	if _, err := ctr.SetLabels(ctx, map[string]string{LabelNetwork: st.label()}); err != nil {
		// The firewall is ahead of the label; put it back.
		_ = m.cfg.Network.SetAllow(id, cur)
		return nil, fmt.Errorf("store the allowlist of %s: %w", id, err)
	}
	m.log.Info("allowlist changed", "sandbox", id, "allow", st.Allow)
	return st.info(m.cfg.Network.Gateway().String()), nil
}

// mergeAllow is cur plus add (without duplicates) minus del.
func mergeAllow(cur, add, del []network.Dest) []network.Dest {
	out := slices.Clone(cur)
	for _, d := range add {
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return slices.DeleteFunc(out, func(d network.Dest) bool { return slices.Contains(del, d) })
}

// restoreNetworks re-installs every egress sandbox's rules after a boxd
// restart.
func (m *Manager) restoreNetworks(ctx context.Context) error {
	if m.cfg.Network == nil {
		return nil
	}
	ctrs, err := m.cfg.Client.Containers(ctx, fmt.Sprintf(`labels."%s"`, LabelNetwork))
	if err != nil {
		return fmt.Errorf("list egress sandboxes: %w", err)
	}
	var errs []error
	for _, ctr := range ctrs {
		labels, err := ctr.Labels(ctx)
		if err != nil {
			continue
		}
		st, err := parseNetState(labels)
		if err != nil || st == nil {
			errs = append(errs, fmt.Errorf("sandbox %s: %v", ctr.ID(), err))
			continue
		}
		allow, err := network.ParseAllow("allow", st.Allow)
		if err != nil {
			errs = append(errs, fmt.Errorf("sandbox %s: %w", ctr.ID(), err))
			continue
		}
		if !st.Addr.IsValid() {
			// boxd died between the container and the attach's end: with no
			// rules of its own the sandbox's traffic meets the final reject.
			errs = append(errs, fmt.Errorf("sandbox %s: its network label has no address (create interrupted); it has no egress", ctr.ID()))
			continue
		}
		m.cfg.Network.SetSecrets(ctr.ID(), ownerOf(labels), st.Secrets)
		if err := m.cfg.Network.Restore(ctr.ID(), st.Attachment, allow); err != nil {
			errs = append(errs, fmt.Errorf("sandbox %s: %w", ctr.ID(), err))
		}
	}
	return errors.Join(errs...)
}

// collectNetworks removes network state (namespaces, address leases,
// firewall rules) of ids that are no sandbox: left by a boxd killed in the
// middle of a create or delete.
func (m *Manager) collectNetworks(ctx context.Context) {
	if m.cfg.Network == nil {
		return
	}
	owners, err := m.cfg.Network.Owners()
	if err != nil {
		m.log.Warn("network: list state", "err", err)
		return
	}
	for _, id := range owners {
		if !m.claim(id) {
			continue // being created or deleted
		}
		_, err := m.cfg.Client.LoadContainer(ctx, id)
		if errdefs.IsNotFound(err) {
			if err := m.cfg.Network.Teardown(ctx, id); err != nil {
				m.log.Warn("network: remove orphaned state", "sandbox", id, "err", err)
			} else {
				m.log.Info("network: removed orphaned state", "sandbox", id)
			}
		}
		m.release(id)
	}
}

// renewNetwork makes an egress sandbox's network again from its label if
// its pinned namespace is gone, as after a host reboot (the bind mount,
// bridge, veth and nftables tables are gone then, while the address lease
// and libcni's cache are on disk): what is left of the old one is removed,
// a new namespace is made at the same path (the stored spec names it) and
// attached, with the allowlist of the label, and the label gets the new
// address. A namespace that is still there (only the init died) is kept.
func (m *Manager) renewNetwork(ctx context.Context, ctr client.Container) error {
	labels, err := ctr.Labels(ctx)
	if err != nil {
		return err
	}
	st, err := parseNetState(labels)
	if err != nil || st == nil || st.Mode != network.ModeEgress {
		return err
	}
	id := ctr.ID()
	if m.cfg.Network == nil {
		return fmt.Errorf("network egress is not available in this boxd (%s): %w", m.cfg.NetworkErr, errdefs.ErrFailedPrecondition)
	}
	if network.NetNSAlive(m.cfg.Network.NetNSPath(id)) {
		return nil
	}
	allow, err := network.ParseAllow("allow", st.Allow)
	if err != nil {
		return err
	}
	m.log.Warn("network namespace gone (host restarted?); making the sandbox's network again", "sandbox", id, "old_addr", st.Addr)
	if err := m.cfg.Network.Teardown(ctx, id); err != nil {
		return fmt.Errorf("network: remove what is left of the old one: %w", err)
	}
	if err := m.writeResolvConf(id); err != nil {
		return err
	}
	att, err := m.cfg.Network.Setup(ctx, id, allow)
	if err != nil {
		return err
	}
	st.Attachment = *att
	if _, err := ctr.SetLabels(ctx, map[string]string{LabelNetwork: st.label()}); err != nil {
		if terr := m.cfg.Network.Teardown(context.WithoutCancel(ctx), id); terr != nil {
			m.log.Error("network: undo", "sandbox", id, "err", terr)
		}
		return fmt.Errorf("store the network of %s: %w", id, err)
	}
	m.log.Info("network made again", "sandbox", id, "addr", att.Addr, "allow", st.Allow)
	return nil
}
