package network

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/containerd/errdefs"
	"github.com/containernetworking/cni/libcni"

	"github.com/boxd-dev/boxd/internal/secrets"
)

// Defaults of the boxd flags.
const (
	DefaultBridge = "boxd0"
	DefaultSubnet = "10.213.0.0/16"
	DefaultTable  = "boxd"
)

// DefaultPluginDirs is where Debian's containernetworking-plugins and the
// upstream release put the CNI plugins.
var DefaultPluginDirs = []string{"/usr/lib/cni", "/opt/cni/bin"}

// Config is the daemon-wide network configuration.
type Config struct {
	// StateDir holds the namespaces' mount points (netns/) and host-local's
	// address leases (ipam/).
	StateDir   string
	PluginDirs []string
	Bridge     string       // the bridge's name; also the CNI network's
	Subnet     netip.Prefix // host-local hands out addresses from it; .1 is the gateway
	// Subnet6, if valid, is the IPv6 network sandboxes also get addresses
	// from (::1 of it is the gateway), NATed to the host's IPv6 (NAT66);
	// without it egress is IPv4 only.
	Subnet6 netip.Prefix
	Table   string // name of boxd's nftables tables
	// CNICacheDir is libcni's cache directory (its results/ holds each
	// attachment's result); "" is libcni's default, /var/lib/cni, the
	// default instance's.
	CNICacheDir string
	// DNSUpstream is the resolver boxd's DNS forwards allowed names to
	// (host:port); empty means the first nameserver of /etc/resolv.conf.
	DNSUpstream string
	// Block is what the admin adds to the always-blocked set (--block):
	// IPv4 and IPv6 networks, host bits zero.
	Block  []netip.Prefix
	Logger *slog.Logger
	// Secrets and CA, both set, turn the secret broker on (broker.go).
	Secrets *secrets.Store
	CA      *secrets.CA
}

// Attachment is what a sandbox's network is, as the runtime stores it.
type Attachment struct {
	NetNS   string     `json:"netns"`
	Addr    netip.Addr `json:"addr"`
	Gateway netip.Addr `json:"gateway"`
	Addr6   netip.Addr `json:"addr6,omitzero"` // with Config.Subnet6
	Veth    string     `json:"veth"`           // the host end, a port of the bridge
}

// Manager sets sandboxes' networks up and tears them down. It is safe for
// concurrent use.
type Manager struct {
	cfg Config
	log *slog.Logger
	cni *cniNets
	// legacyCNI removes attachments of the layout with a CNI loopback
	// network first (see legacyIfName).
	legacyCNI *cniNets
	fw        *firewall

	mu    sync.Mutex // serialises firewall changes and guards the maps
	ready bool       // tables made in this process
	bySrc map[netip.Addr]*member
	byID  map[string]*member

	dns *resolver
	// deny is the deny log: refused connections (from the kernel, see
	// nflog.go) and refused DNS names, per sandbox.
	deny *denyLog
	// blockedNow is the always-blocked set last written, for the
	// resolver; nil before the first (then every address counts as
	// blocked).
	blockedNow atomic.Pointer[[]netip.Prefix]
	// secrets are the secrets each sandbox was given (guarded by mu);
	// broker is the proxy that brokers them, started with the resolver.
	secrets map[string]*brokered
	broker  *broker
}

// member is a running egress sandbox as the resolver sees it.
type member struct {
	id    string
	addr  netip.Addr
	addr6 netip.Addr // invalid without IPv6
	allow []Dest
}

// New checks cfg. It changes nothing on the host until the first egress
// sandbox.
func New(cfg Config) (*Manager, error) {
	if cfg.Bridge == "" {
		cfg.Bridge = DefaultBridge
	}
	if cfg.Table == "" {
		cfg.Table = DefaultTable
	}
	if len(cfg.PluginDirs) == 0 {
		cfg.PluginDirs = DefaultPluginDirs
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if !cfg.Subnet.IsValid() {
		cfg.Subnet = netip.MustParsePrefix(DefaultSubnet)
	}
	if !cfg.Subnet.Addr().Is4() || cfg.Subnet.Bits() > 28 || cfg.Subnet.Masked() != cfg.Subnet {
		return nil, fmt.Errorf("bridge-subnet %s: must be an IPv4 network (host bits zero) of /28 or larger", cfg.Subnet)
	}
	if s6 := cfg.Subnet6; s6.IsValid() && (!s6.Addr().Is6() || s6.Addr().Is4In6() || s6.Bits() < 48 || s6.Bits() > 120 || s6.Masked() != s6) {
		return nil, fmt.Errorf("bridge-subnet6 %s: must be an IPv6 network (host bits zero) of /48 to /120", s6)
	}
	for _, p := range cfg.Block {
		if p.Masked() != p {
			return nil, fmt.Errorf("block %s: must be a network with host bits zero", p)
		}
	}
	if len(cfg.Bridge) > 15 || strings.ContainsAny(cfg.Bridge, "/ \x00") {
		return nil, fmt.Errorf("bridge %q: not a usable interface name", cfg.Bridge)
	}
	if !filepath.IsAbs(cfg.StateDir) {
		return nil, fmt.Errorf("network state dir %q must be absolute", cfg.StateDir)
	}
	for _, d := range []string{cfg.StateDir, filepath.Join(cfg.StateDir, "netns"), filepath.Join(cfg.StateDir, "ipam")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("network state dir: %w", err)
		}
	}
	// No loopback network: newNetNS brings lo up itself (see there).
	cni, err := newCNI(cfg.PluginDirs, cfg.CNICacheDir, conflist(cfg), false)
	if err != nil {
		return nil, err
	}
	gw := cfg.Subnet.Addr().Next()
	upstream, err := upstreamFrom(cfg.DNSUpstream)
	if err != nil {
		if cfg.DNSUpstream != "" {
			return nil, err
		}
		// Not fatal: CIDR allowlists work without it; names get SERVFAIL.
		cfg.Logger.Warn("network: no DNS upstream; egress sandboxes cannot resolve names", "err", err)
	}
	// The layout of sandboxes made by a boxd before this one (legacyIfName),
	// used only to remove their attachments.
	legacyCNI, err := newCNI(cfg.PluginDirs, cfg.CNICacheDir, conflist(cfg), true)
	if err != nil {
		return nil, err
	}
	m := &Manager{cfg: cfg, log: cfg.Logger, cni: cni, legacyCNI: legacyCNI,
		fw: &firewall{table: cfg.Table, group: nflogGroup(cfg.Table), bridge: cfg.Bridge, subnet: cfg.Subnet, gw: gw,
			subnet6: cfg.Subnet6},
		bySrc: map[netip.Addr]*member{}, byID: map[string]*member{}, deny: newDenyLog(),
		secrets: map[string]*brokered{}}
	m.dns = &resolver{m: m, upstream: upstream, log: cfg.Logger}
	return m, nil
}

// conflist is the CNI network: a bridge with the gateway on it and no
// masquerade of its own (boxd's nftables does NAT), host-local addresses
// kept under boxd's state dir; with Subnet6 an IPv6 range and route too.
// The bridge plugin's DAD stays off (its default), so an address is
// usable at once.
func conflist(cfg Config) string {
	ranges, routes := fmt.Sprintf(`[{"subnet": %q}]`, cfg.Subnet.String()), `{"dst": "0.0.0.0/0"}`
	if cfg.Subnet6.IsValid() {
		ranges += fmt.Sprintf(`, [{"subnet": %q}]`, cfg.Subnet6.String())
		routes += `, {"dst": "::/0"}`
	}
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": %q,
  "plugins": [{
    "type": "bridge",
    "bridge": %q,
    "isGateway": true,
    "ipMasq": false,
    "hairpinMode": false,
    "ipam": {
      "type": "host-local",
      "ranges": [%s],
      "routes": [%s],
      "dataDir": %q
    }
  }]
}`, cfg.Bridge, cfg.Bridge, ranges, routes, filepath.Join(cfg.StateDir, "ipam"))
}

// Gateway is the bridge's address, where the resolver answers.
func (m *Manager) Gateway() netip.Addr { return m.fw.gw }

// IPv6 reports whether sandboxes get IPv6 egress (Config.Subnet6).
func (m *Manager) IPv6() bool { return m.cfg.Subnet6.IsValid() }

// CheckForwarding fails with failed_precondition if the kernel does not
// forward IPv4 in boxd's network namespace, nor, with IPv6 egress,
// IPv6. boxd never turns it on itself (and checks before the CNI bridge
// plugin, which would).
func (m *Manager) CheckForwarding() error {
	if err := CheckForwarding(); err != nil {
		return err
	}
	if !m.IPv6() {
		return nil
	}
	const p = "/proc/sys/net/ipv6/conf/all/forwarding"
	b, err := os.ReadFile(p)
	if err != nil {
		return fmt.Errorf("network egress: read net.ipv6.conf.all.forwarding: %w", err)
	}
	if strings.TrimSpace(string(b)) != "1" {
		return fmt.Errorf("IPv6 egress (--bridge-subnet6) needs IPv6 forwarding, and net.ipv6.conf.all.forwarding is %s in boxd's network namespace (boxd does not change it; set it with sysctl): %w",
			strings.TrimSpace(string(b)), errdefs.ErrFailedPrecondition)
	}
	return nil
}

func (m *Manager) netnsPath(id string) string { return filepath.Join(m.cfg.StateDir, "netns", id) }

// NetNSPath is where Prepare pins sandbox id's namespace.
func (m *Manager) NetNSPath(id string) string { return m.netnsPath(id) }

// CheckForwarding fails with failed_precondition if the kernel does not
// forward IPv4 in boxd's network namespace. boxd never turns it on itself.
func CheckForwarding() error {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	if err != nil {
		return fmt.Errorf("network egress: read net.ipv4.ip_forward: %w", err)
	}
	if strings.TrimSpace(string(b)) != "1" {
		return fmt.Errorf("network egress needs IP forwarding, and net.ipv4.ip_forward is %s in boxd's network namespace (boxd does not change it; set it with sysctl): %w",
			strings.TrimSpace(string(b)), errdefs.ErrFailedPrecondition)
	}
	return nil
}

// CheckPlugins fails with failed_precondition if a CNI plugin is missing.
func (m *Manager) CheckPlugins() error {
	for _, p := range []string{"bridge", "host-local"} {
		found := false
		for _, d := range m.cfg.PluginDirs {
			if st, err := os.Stat(filepath.Join(d, p)); err == nil && st.Mode().IsRegular() {
				found = true
				break
			}
		}
		if !found {
			return fmt.Errorf("network egress needs the CNI plugin %q in %s (Debian package containernetworking-plugins): %w",
				p, strings.Join(m.cfg.PluginDirs, ":"), errdefs.ErrFailedPrecondition)
		}
	}
	return nil
}

// Setup makes sandbox id's namespace, attaches it to the bridge and
// installs its firewall rules. On failure nothing of it is left.
func (m *Manager) Setup(ctx context.Context, id string, allow []Dest) (_ *Attachment, retErr error) {
	if _, err := m.Prepare(id); err != nil {
		return nil, err
	}
	att, err := m.Attach(ctx, id, allow)
	if err != nil {
		if terr := m.Teardown(context.WithoutCancel(ctx), id); terr != nil {
			m.log.Error("network: undo a failed setup", "sandbox", id, "err", terr)
		}
		return nil, err
	}
	return att, nil
}

// Prepare checks the host and makes sandbox id's namespace, empty, at the
// path it returns, so a runtime spec can name it while Attach runs. The
// caller tears down on a later failure.
func (m *Manager) Prepare(id string) (string, error) {
	if err := m.CheckForwarding(); err != nil {
		return "", err
	}
	if err := m.CheckPlugins(); err != nil {
		return "", err
	}
	t0 := time.Now()
	if err := m.prepare(); err != nil {
		return "", err
	}
	tTables := time.Since(t0)
	path := m.netnsPath(id)
	if err := newNetNS(path, m.IPv6()); err != nil {
		return "", err
	}
	m.log.Debug("network prepare timing", "sandbox", id, "tables", tTables.Round(time.Microsecond), "total", time.Since(t0).Round(time.Microsecond))
	return path, nil
}

// Attach connects sandbox id's prepared namespace to the bridge (CNI) and
// installs its firewall rules. The caller tears down on failure.
func (m *Manager) Attach(ctx context.Context, id string, allow []Dest) (*Attachment, error) {
	t0 := time.Now()
	path := m.netnsPath(id)
	res, err := m.cni.add(ctx, id, path)
	if err != nil {
		return nil, fmt.Errorf("network: cni add: %w", err)
	}
	tCNI := time.Since(t0)
	att := &Attachment{NetNS: path}
	for _, r := range res {
		for _, c := range r.IPs {
			if a, ok := netip.AddrFromSlice(c.Address.IP.To4()); ok && c.Address.IP.To4() != nil && m.cfg.Subnet.Contains(a) {
				att.Addr = a
				att.Gateway, _ = netip.AddrFromSlice(c.Gateway.To4())
			}
			if a, ok := netip.AddrFromSlice(c.Address.IP); ok && c.Address.IP.To4() == nil && m.cfg.Subnet6.Contains(a) {
				att.Addr6 = a
			}
		}
	}
	if !att.Addr.IsValid() {
		return nil, fmt.Errorf("network: cni gave sandbox %s no address in %s", id, m.cfg.Subnet)
	}
	if m.IPv6() && !att.Addr6.IsValid() {
		return nil, fmt.Errorf("network: cni gave sandbox %s no address in %s", id, m.cfg.Subnet6)
	}
	for _, r := range res {
		for _, ifc := range r.Interfaces {
			if ifc.Sandbox == "" && ifc.Name != m.cfg.Bridge {
				att.Veth = ifc.Name
			}
		}
	}
	if att.Veth == "" {
		return nil, fmt.Errorf("network: cni reported no host veth for sandbox %s", id)
	}
	if err := m.attach(id, att, allow, true); err != nil {
		return nil, err
	}
	m.log.Debug("network attach timing", "sandbox", id, "cni", tCNI.Round(time.Microsecond), "total", time.Since(t0).Round(time.Microsecond))
	return att, nil
}

// attach installs id's rules, with a refresh of the always-blocked set, in
// one nftables transaction, and registers it with the resolver. fresh says
// id is new here, so none of its rules can exist yet (a restore may find
// them). The set is read under mu, so a refresh by watchHost cannot be
// overwritten by an older reading.
func (m *Manager) attach(id string, att *Attachment, allow []Dest, fresh bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.IPv6() {
		// Made by a boxd with IPv6 egress: without it here, its IPv6
		// stays in the sandbox (from_sandbox drops it).
		att.Addr6 = netip.Addr{}
	}
	blocked, err := m.blocked()
	if err != nil {
		return err
	}
	if err := m.fw.install(id, att.Addr, att.Addr6, att.Veth, allow, blocked, fresh); err != nil {
		return err
	}
	m.blockedNow.Store(&blocked)
	mb := &member{id: id, addr: att.Addr, addr6: att.Addr6, allow: allow}
	m.bySrc[att.Addr] = mb
	if att.Addr6.IsValid() {
		m.bySrc[att.Addr6] = mb
	}
	m.byID[id] = mb
	return nil
}

// prepare makes boxd's tables if they are missing (and, once per process,
// writes the rules for traffic to the host again, so tables an older boxd
// made get this one's), and starts the resolver and the watch of the
// host's addresses and routes once per process. The always-blocked set is
// also filled in by each attach, in the same transaction as the sandbox's
// rules.
func (m *Manager) prepare() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.ready && m.Brokering() && m.broker == nil {
		// Before the rules: they let sandboxes reach its ports only if
		// it holds them (another program of the host's may).
		if err := m.startBroker(); err != nil {
			m.log.Warn("network: no secret broker; sandboxes' secrets go out as placeholders", "err", err)
		}
		m.fw.broker = m.broker != nil
	}
	if err := m.fw.ensure(!m.ready); err != nil {
		return err
	}
	if !m.ready {
		if err := m.dns.start(m.fw.gw); err != nil {
			return err
		}
		m.log.Info("network: resolver for egress sandboxes", "addr", m.fw.gw, "upstream", m.dns.upstream, "secret broker", m.broker != nil)
		go m.watchHost()
		m.startDenyLog()
	}
	m.ready = true
	return nil
}

// startDenyLog binds the kernel's log of refusals and starts the
// window's flushes. Without the log (the group is taken by another
// program) boxd still refuses what it must, and logs refused names.
func (m *Manager) startDenyLog() {
	go m.deny.run()
	r, err := openNFLog(m.fw.group)
	if err != nil {
		m.log.Warn("network: the deny log has no refused connections (refused DNS names only)", "group", m.fw.group, "err", err)
		return
	}
	go m.watchDenials(r)
}

// OnDeny sets what is told of each sandbox's records at the end of each
// deny-log window (and at teardown): events.
func (m *Manager) OnDeny(f func(id string, recs []DenyRecord)) { m.deny.onFlush.Store(&f) }

// DenyLog is sandbox id's deny log, oldest first: the records of past
// windows (at most DenyRecordsPerSandbox), then the current window's.
func (m *Manager) DenyLog(id string) []DenyRecord { return m.deny.records(id) }

// member is the egress sandbox with source address a, or nil.
func (m *Manager) member(a netip.Addr) *member {
	m.mu.Lock()
	defer m.mu.Unlock()
	mb := m.bySrc[a]
	if mb == nil {
		return nil
	}
	cp := *mb
	return &cp
}

// admit lets sandbox id reach addrs (on ports, or every port if none)
// for ttl: its resolver's answer.
func (m *Manager) admit(id string, addrs []netip.Addr, ports []uint16, ttl time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.byID[id] == nil {
		return fmt.Errorf("sandbox %s is gone", id)
	}
	if !m.byID[id].addr6.IsValid() {
		// A sandbox without IPv6 has no IPv6 sets.
		addrs = slices.DeleteFunc(slices.Clone(addrs), func(a netip.Addr) bool { return a.Is6() })
	}
	if len(ports) == 0 {
		return m.fw.admit(id, addrs, 0, ttl)
	}
	for _, p := range ports {
		if err := m.fw.admit(id, addrs, p, ttl); err != nil {
			return err
		}
	}
	return nil
}

// Restore re-installs the rules of a sandbox that existed before boxd
// restarted (nftables keeps them across a boxd restart, but not across a
// reboot, and the resolver's map is in memory).
func (m *Manager) Restore(id string, att Attachment, allow []Dest) error {
	if err := m.prepare(); err != nil {
		return err
	}
	return m.attach(id, &att, allow, false)
}

// SetAllow replaces a running sandbox's allowlist; it takes effect for the
// next connection (connections already open stay open). If an entry goes,
// the addresses its resolver handed out go too, so names still allowed
// must be looked up again.
func (m *Manager) SetAllow(id string, allow []Dest) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	mb := m.byID[id]
	if mb == nil {
		return fmt.Errorf("sandbox %s has no egress network in this boxd: %w", id, errdefs.ErrFailedPrecondition)
	}
	forget := slices.ContainsFunc(mb.allow, func(d Dest) bool { return !slices.Contains(allow, d) })
	if err := m.fw.replaceAllow(id, allow, forget, mb.addr6.IsValid()); err != nil {
		return err
	}
	mb.allow = allow
	return nil
}

// Teardown removes everything of sandbox id's network: firewall rules and
// sets, the CNI attachment (veth and address lease) and the namespace.
// Missing pieces are fine, so it can run on a half-made sandbox.
func (m *Manager) Teardown(ctx context.Context, id string) error {
	var errs []error
	m.mu.Lock()
	if mb := m.byID[id]; mb != nil {
		delete(m.bySrc, mb.addr)
		delete(m.bySrc, mb.addr6)
		delete(m.byID, id)
	}
	errs = append(errs, m.fw.remove(id))
	m.mu.Unlock()
	m.deny.forget(id)
	m.SetSecrets(id, 0, nil)

	path := m.netnsPath(id)
	_, err := os.Stat(path)
	pinned := err == nil
	// The plugins run only if CNI may hold something of id's: a sandbox
	// of network none (every delete comes here) has neither namespace,
	// lease nor cached result, and two plugin processes per delete would
	// cost every other create on the host CPU.
	if holds, legacy := m.cniHolds(id); pinned || holds {
		nsPath := path
		if !NetNSAlive(path) {
			// Never made, or gone with a reboot (the pin is then an empty
			// file): the plugins then only release the address.
			nsPath = ""
		}
		cni := m.cni
		if legacy {
			cni = m.legacyCNI
		}
		if err := cni.remove(ctx, id, nsPath); err != nil {
			errs = append(errs, fmt.Errorf("network: cni del of %s: %w", id, err))
		}
	}
	errs = append(errs, removeNetNS(path))
	// A sandbox made before lo was brought up in-process also ran the
	// CNI loopback plugin; libcni cached that result. Nothing else holds
	// anything of it (the lo went with the namespace).
	if err := os.Remove(filepath.Join(m.resultsDir(), "cni-loopback-"+id+"-lo")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, fmt.Errorf("network: %w", err))
	}
	return errors.Join(errs...)
}

// resultsDir is where libcni caches each attachment's result.
func (m *Manager) resultsDir() string {
	if m.cfg.CNICacheDir == "" {
		return filepath.Join(libcni.CacheDir, "results")
	}
	return filepath.Join(m.cfg.CNICacheDir, "results")
}

// The interface CNI names in the sandbox: eth0, the first network's.
// Before lo was brought up in-process, the CNI loopback network came first
// and the bridge's interface was eth1 (legacyIfName); libcni and host-local
// key their state by container id and interface name, so such a sandbox's
// attachment is removed with that layout (Manager.legacyCNI).
const (
	ifName       = "eth0"
	legacyIfName = "eth1"
)

// cniHolds reports whether host-local holds an address lease for id or
// libcni a cached result of its attachment, and whether that is of the
// legacy layout.
func (m *Manager) cniHolds(id string) (holds, legacy bool) {
	for _, name := range []string{ifName, legacyIfName} {
		if _, err := os.Stat(filepath.Join(m.resultsDir(), m.cfg.Bridge+"-"+id+"-"+name)); err == nil {
			return true, name == legacyIfName
		}
	}
	leases, err := m.leases()
	if err != nil {
		return true, false // when in doubt, let the plugins look
	}
	for _, l := range leases[id] {
		return true, l.ifName == legacyIfName
	}
	return false, false
}

// Owners lists the sandbox ids that hold any network state here:
// namespaces, address leases, firewall rules.
func (m *Manager) Owners() ([]string, error) {
	seen := map[string]bool{}
	ents, err := os.ReadDir(filepath.Join(m.cfg.StateDir, "netns"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	for _, e := range ents {
		seen[e.Name()] = true
	}
	leases, err := m.leases()
	if err != nil {
		return nil, err
	}
	for id := range leases {
		seen[id] = true
	}
	ids, err := m.fw.ids()
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		seen[id] = true
	}
	out := make([]string, 0, len(seen))
	for id := range seen {
		out = append(out, id)
	}
	return out, nil
}

// lease is one address host-local leased.
type lease struct {
	addr   string
	ifName string
}

// leases maps sandbox id to the addresses host-local leased to it. Its
// files are named by address and hold the container id, a line break and
// the interface name.
func (m *Manager) leases() (map[string][]lease, error) {
	dir := filepath.Join(m.cfg.StateDir, "ipam", m.cfg.Bridge)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[string][]lease{}
	for _, e := range ents {
		if _, err := netip.ParseAddr(e.Name()); err != nil {
			continue // lock, last_reserved_ip.0
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		id, ifn, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
		id = strings.TrimSpace(id)
		out[id] = append(out[id], lease{addr: e.Name(), ifName: strings.TrimSpace(ifn)})
	}
	return out, nil
}
