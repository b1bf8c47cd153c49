//go:build linux

// Command boxd is the sandbox daemon: it serves boxd's API on a Unix socket
// and runs sandboxes through containerd.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/urfave/cli/v2"

	"github.com/boxd-dev/boxd/internal/events"
	"github.com/boxd-dev/boxd/internal/gvisor"
	"github.com/boxd-dev/boxd/internal/runc"
	"github.com/boxd-dev/boxd/internal/secrets"
	"github.com/boxd-dev/boxd/network"
	"github.com/boxd-dev/boxd/network/ports"
	"github.com/boxd-dev/boxd/registry"
	"github.com/boxd-dev/boxd/rpc"
	"github.com/boxd-dev/boxd/runtime"
	"github.com/boxd-dev/boxd/snapshot"
	"github.com/boxd-dev/boxd/systemd"
)

func main() {
	if err := newApp().Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "boxd:", err)
		os.Exit(1)
	}
}

func newApp() *cli.App {
	return &cli.App{
		Name:  "boxd",
		Usage: "run untrusted code in locked-down containerd sandboxes",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "config", EnvVars: []string{"BOXD_CONFIG"}, Usage: "TOML file of settings: keys are these flags' names (socket-group = \"boxd\"); flags given here win"},
			&cli.StringFlag{Name: "socket", Value: rpc.DefaultSocket, EnvVars: []string{"BOXD_SOCKET"}, Usage: "Unix socket to serve the API on (ignored under socket activation)"},
			&cli.StringFlag{Name: "socket-group", Usage: "group that may use the socket (default: root only)"},
			&cli.StringFlag{Name: "containerd", Value: "/run/containerd/containerd.sock", Usage: "containerd's socket (never a fallback: a missing one stops boxd), or \"embedded\": boxd starts and supervises a containerd of its own under --state-dir (the one scripts/setup.sh builds into $BOXD_DEPS, else containerd on PATH)"},
			&cli.StringFlag{Name: "namespace", Value: "boxd", Usage: "containerd namespace for boxd's sandboxes and images"},
			&cli.StringFlag{Name: "state-dir", Value: "/var/lib/boxd", Usage: "directory for per-sandbox channels and init logs"},
			&cli.StringFlag{Name: "default-image", Value: "boxd/busybox:latest", Usage: "image used when a create names none"},
			&cli.StringFlag{Name: "init-binary", Usage: "static boxd-init binary (default: boxd-init next to boxd, then /usr/local/libexec/boxd/boxd-init)"},
			&cli.StringFlag{Name: "snapshotter", Value: "overlayfs"},
			&cli.StringFlag{Name: "runc", Value: runc.PinnedPath(), Usage: "runc binary every sandbox runs on (default: the runc " + runc.Pinned + " scripts/setup.sh builds into $BOXD_DEPS)"},
			&cli.StringFlag{Name: "runsc", Value: gvisor.PinnedPath(), Usage: "gVisor's runsc for --runtime gvisor sandboxes, with containerd-shim-runsc-v1 next to it (default: the gVisor scripts/setup.sh builds into $BOXD_DEPS); if missing, gvisor sandboxes are refused"},
			&cli.StringFlag{Name: "default-runtime", Value: runtime.RuntimeRunc, Usage: "runtime of a create that names none: runc or gvisor"},
			&cli.BoolFlag{Name: "allow-vulnerable-runtime", Usage: "start even if the runc has known container escapes (inspect then lists them on every sandbox)"},
			&cli.DurationFlag{Name: "default-ttl", Value: time.Hour, Usage: "lifetime of a sandbox whose create names no ttl"},
			&cli.DurationFlag{Name: "expiry-interval", Value: 5 * time.Second, Usage: "how often boxd looks for expired sandboxes and dead inits"},
			&cli.StringFlag{Name: "default-memory", Value: "512m"},
			&cli.StringFlag{Name: "default-disk", Value: defaultDisk, Usage: "disk cap of a sandbox whose create names none: its writable layer and /workspace in an ext4 image of their own (sparse: the host holds only what is written); 0: no cap unless a create asks for one"},
			&cli.Float64Flag{Name: "default-cpus", Value: 1},
			&cli.Int64Flag{Name: "default-pids", Value: 256},
			&cli.UintFlag{Name: "userns-host-id", Value: 200000, Usage: "first host uid/gid of the blocks sandboxes get: root in each sandbox maps to the first id of its own block"},
			&cli.UintFlag{Name: "shim-group-size", Value: runtime.DefaultShimGroupSize, Usage: fmt.Sprintf("how many sandboxes share one runc shim process (1 to %d; 1: each its own)", runtime.MaxShimGroupSize)},
			&cli.UintFlag{Name: "userns-ranges", Value: runtime.DefaultIDRanges, Usage: "how many uid/gid blocks of --userns-size sandboxes (and pool members) may hold at once"},
			&cli.UintFlag{Name: "userns-size", Value: 65536, Usage: "number of ids mapped into each sandbox"},
			&cli.StringFlag{Name: "restart-limit", Value: runtime.DefaultRestartPolicy.String(), Usage: "restarts of a sandbox's dead init allowed per window (N/WINDOW, e.g. 5/10m; 0: never restart)"},
			&cli.DurationFlag{Name: "restart-backoff", Value: runtime.DefaultRestartPolicy.Backoff, Usage: "pause after a sandbox's first restart in the window, doubling with each further one (up to 1m)"},
			&cli.DurationFlag{Name: "idle-timeout", Usage: "pause or delete (--on-idle) a sandbox after this long without an exec, file call or attached stream, when its create names no idle timeout (0: never)"},
			&cli.StringFlag{Name: "on-idle", Value: runtime.IdlePause, Usage: "what the idle timeout does by default: pause, delete or checkpoint (gvisor sandboxes with a memory limit and a disk cap; others are paused)"},
			poolFlag(),
			&cli.StringFlag{Name: "bridge", Value: network.DefaultBridge, Usage: "bridge of --network egress sandboxes (made on first use)"},
			&cli.StringFlag{Name: "bridge-subnet", Value: network.DefaultSubnet, Usage: "IPv4 network egress sandboxes get addresses from (the gateway is .1)"},
			&cli.StringFlag{Name: "dns-upstream", Usage: "resolver (host[:port]) egress sandboxes' allowed names are forwarded to (default: the first nameserver in /etc/resolv.conf)"},
			&cli.StringFlag{Name: "bridge-subnet6", Usage: "IPv6 network egress sandboxes also get addresses from (NAT66 to the host's IPv6; the gateway is ::1 of it); empty: egress is IPv4 only"},
			&cli.StringSliceFlag{Name: "block", Usage: "CIDR or address (IPv4 or IPv6) added to the set egress sandboxes never reach, whatever their allowlist's names or '*' (repeatable)"},
			&cli.StringFlag{Name: "cni-plugin-dir", Value: strings.Join(network.DefaultPluginDirs, ":"), Usage: "where the CNI plugins bridge and host-local are (colon-separated)"},
			&cli.StringSliceFlag{Name: "allow-publish-address", Usage: "host address other than loopback that sandbox ports may be published on (repeatable); such ports are reachable from other machines"},
			&cli.StringSliceFlag{Name: "insecure-registry", Usage: "registry HOST:PORT reached over plain HTTP instead of HTTPS (repeatable); every other registry is HTTPS only"},
			&cli.StringSliceFlag{Name: "registry-ca", Usage: "PEM file, or directory of *.pem/*.crt files, with CA certificates trusted for registries besides the system's (repeatable)"},
			&cli.DurationFlag{Name: "registry-timeout", Value: registry.DefaultTimeout, Usage: "how long a registry may stay silent (connect, answer, or mid-download) before a pull or push fails"},
			&cli.StringFlag{Name: "max-image-size", Value: formatSize(registry.DefaultMaxImageSize), Usage: "most a pulled image's layers may expand to, uncompressed (0: no limit)"},
			&cli.BoolFlag{Name: "debug"},
		}, append(append(append(limitFlags(readHost()), ownerFlags()...), instanceFlags()...), append(append(listenFlags(), bindFlags()...), dockerFlags()...)...)...),
		Before: loadConfig,
		Action: func(cc *cli.Context) error {
			if err := applyInstance(cc); err != nil {
				return fromConfig(cc, err)
			}
			if cc.Bool("print-config") {
				printConfig(cc.App.Writer, names(cc))
				printBindRoots(cc.App.Writer, cc)
				return nil
			}
			return fromConfig(cc, run(cc))
		},
	}
}

func findInit(flag string) (string, error) {
	cands := []string{flag}
	if flag == "" {
		if exe, err := os.Executable(); err == nil {
			cands = append(cands, filepath.Join(filepath.Dir(exe), "boxd-init"))
		}
		cands = append(cands, "/usr/local/libexec/boxd/boxd-init")
	}
	for _, c := range cands {
		if c == "" {
			continue
		}
		if abs, err := filepath.Abs(c); err == nil {
			if st, err := os.Stat(abs); err == nil && st.Mode().IsRegular() {
				return abs, nil
			}
		}
	}
	return "", fmt.Errorf("boxd-init not found (tried %v); build it with make build or pass --init-binary", cands[1:])
}

func run(cc *cli.Context) error {
	level := slog.LevelInfo
	if cc.Bool("debug") {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	slog.SetDefault(log)
	if err := startPprof(log); err != nil {
		return err
	}
	logNames(log, names(cc))
	slot, err := claimSlot(names(cc))
	if err != nil {
		return err
	}
	defer slot.Close()
	st, err := parseSettings(cc)
	if err != nil {
		return err
	}
	auditLog, err := openAudit(cc)
	if err != nil {
		return err
	}
	defer auditLog.Close()
	rts, err := checkRuntimes(cc, log, st)
	if err != nil {
		return err
	}
	netMgr, err := newNetwork(cc, log)
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx = namespaces.WithNamespace(ctx, cc.String("namespace"))
	c, stopContainerd, err := connectContainerd(ctx, cc, log)
	if err != nil {
		return err
	}
	defer stopContainerd()
	evlog, err := events.Open(events.Config{Dir: filepath.Join(cc.String("state-dir"), "events"), Logger: log})
	if err != nil {
		return err
	}
	defer evlog.Close()
	images := snapshot.New(c, cc.String("snapshotter"))
	reg, err := newRegistry(cc, images)
	if err != nil {
		return err
	}
	mgr, err := runtime.NewManager(managerConfig(cc, log, st, rts, c, images, netMgr, evlog))
	if err != nil {
		return err
	}
	// Before anything serves: the totals' cgroup, and the view of which
	// ids clients may reach and how many sandboxes exist.
	if err := mgr.Load(ctx); err != nil {
		return err
	}
	go mgr.RunEvents(ctx)
	go mgr.Run(ctx, cc.Duration("expiry-interval"))
	go mgr.RunPool(ctx)
	srv := &rpc.Server{Manager: mgr, Images: images, Registry: reg, DefaultImage: cc.String("default-image"), Log: log, Events: evlog,
		MaxConns: st.lim.maxConns, IdleTimeout: st.lim.idleTimeout, AdminGIDs: st.admins, Audit: auditLog, DrainTimeout: cc.Duration("drain-timeout")}
	srv.CertMap = st.certMap
	closeRemote, err := openRemote(cc, st.listen, srv)
	if err != nil {
		return err
	}
	defer closeRemote()
	return serve(ctx, cc, log, srv, st.initBin)
}

// settings are what boxd reads from its flags before it touches the
// host: a bad value stops it before containerd is dialled.
type settings struct {
	lim      daemonLimits
	quotas   runtime.Quotas
	admins   []int
	initBin  string
	restarts runtime.RestartPolicy
	onIdle   string
	publish  ports.Policy
	listen   []listenSpec
	certMap  *rpc.CertMap
	binds    []string
	ckMax    int64 // --max-checkpoint-bytes
}

func parseSettings(cc *cli.Context) (st settings, err error) {
	if st.lim, err = parseLimits(cc); err != nil {
		return st, err
	}
	if st.quotas, err = parseQuotas(cc); err != nil {
		return st, err
	}
	if st.admins, err = adminGIDs(cc); err != nil {
		return st, err
	}
	if st.ckMax, err = parseCheckpointMax(cc); err != nil {
		return st, err
	}
	if st.initBin, err = findInit(cc.String("init-binary")); err != nil {
		return st, err
	}
	if st.restarts, err = runtime.ParseRestartLimit(cc.String("restart-limit")); err != nil {
		return st, fmt.Errorf("--restart-limit: %w", err)
	}
	if st.restarts.Backoff = cc.Duration("restart-backoff"); st.restarts.Backoff <= 0 {
		return st, fmt.Errorf("--restart-backoff: %v must be positive", st.restarts.Backoff)
	}
	for _, a := range cc.StringSlice("allow-publish-address") {
		ip, err := netip.ParseAddr(a)
		if err != nil || ip.Zone() != "" || ip.IsUnspecified() {
			return st, fmt.Errorf("--allow-publish-address: %q is not a single IP address", a)
		}
		st.publish.Allowed = append(st.publish.Allowed, ip.Unmap())
	}
	if st.onIdle, err = runtime.ParseOnIdle("--on-idle", cc.String("on-idle")); err != nil {
		return st, err
	}
	if d := cc.Duration("idle-timeout"); d < 0 || (d > 0 && d < time.Second) {
		return st, fmt.Errorf("--idle-timeout: %v must be 0 (never) or at least 1s", d)
	}
	if n := cc.Uint("shim-group-size"); n < 1 || n > runtime.MaxShimGroupSize {
		return st, fmt.Errorf("--shim-group-size: %d must be 1 (a shim per sandbox) to %d", n, runtime.MaxShimGroupSize)
	}
	if st.listen, err = parseListen(cc); err != nil {
		return st, err
	}
	if err = checkDockerFlags(cc); err != nil {
		return st, err
	}
	if f := cc.String("client-cert-map"); f != "" {
		if st.certMap, err = rpc.LoadCertMap(f); err != nil {
			return st, err
		}
	}
	if st.binds, err = parseBindRoots(cc); err != nil {
		return st, err
	}
	return st, nil
}

// runtimes are the runc and gVisor boxd runs sandboxes on.
type runtimes struct {
	runc       runtimeInfo
	gvisor     *runtime.Gvisor
	gvisorErr  string // why gvisor sandboxes are refused, if they are
	defaultRun string
}

func checkRuntimes(cc *cli.Context, log *slog.Logger, st settings) (rts runtimes, err error) {
	if rts.runc, err = checkRuntime(cc, log); err != nil {
		return rts, err
	}
	if rts.gvisor, rts.gvisorErr, rts.defaultRun, err = checkGvisor(cc, log); err != nil {
		return rts, err
	}
	return rts, checkPoolRuntimes(st.lim.pools, rts.gvisor, rts.gvisorErr)
}

func managerConfig(cc *cli.Context, log *slog.Logger, st settings, rts runtimes, c *client.Client, images *snapshot.Store,
	netMgr *network.Manager, evlog *events.Log) runtime.Config {
	lim := st.lim
	return runtime.Config{
		Client: c, Images: images, StateDir: cc.String("state-dir"), InitBinary: st.initBin, Runc: rts.runc.Path, Namespace: cc.String("namespace"),
		RuntimeVersion: rts.runc.Version.String(), RuntimeAdvisories: rts.runc.advisories,
		Gvisor: rts.gvisor, GvisorErr: rts.gvisorErr, DefaultRuntime: rts.defaultRun,
		DefaultImage:  cc.String("default-image"),
		DefaultLimits: runtime.Limits{MemoryBytes: lim.defaultMemory, CPUs: cc.Float64("default-cpus"), Pids: lim.defaultPids, DiskBytes: lim.defaultDisk},
		DefaultTTL:    cc.Duration("default-ttl"),
		MaxMemory:     hostMemory(),
		MaxCPUs:       goruntime.NumCPU(),
		IDBase:        uint32(cc.Uint("userns-host-id")), IDMapSize: uint32(cc.Uint("userns-size")), IDRanges: int(cc.Uint("userns-ranges")),
		ShimGroupSize: int(cc.Uint("shim-group-size")),
		Pools:         lim.pools,
		MaxSandboxes:  lim.maxSandboxes, TotalMemory: lim.memoryTotal, TotalPids: lim.pidsTotal,
		Quotas:      st.quotas,
		Restarts:    st.restarts,
		Network:     netMgr,
		Ports:       st.publish,
		Events:      evlog,
		EventsArgv:  cc.Bool("events-argv"),
		IdleTimeout: cc.Duration("idle-timeout"), OnIdle: st.onIdle,
		Logger:             log,
		BindRoots:          st.binds,
		MaxCheckpointBytes: st.ckMax,
	}
}

// serve listens (systemd's socket, else --socket) and serves until ctx
// ends and the drain is over.
func serve(ctx context.Context, cc *cli.Context, log *slog.Logger, srv *rpc.Server, initBin string) error {
	var ln net.Listener
	gid := -1
	if g := cc.String("socket-group"); g != "" {
		grp, err := user.LookupGroup(g)
		if err != nil {
			return fmt.Errorf("--socket-group: %w", err)
		}
		gid, _ = strconv.Atoi(grp.Gid)
	}
	lns, err := systemd.Listeners()
	if err != nil {
		return err
	}
	if len(lns) > 0 {
		ln = lns[0]
		log.Info("using socket from systemd", "address", ln.Addr())
	} else {
		ln, err = rpc.Listen(cc.String("socket"), gid)
		if err != nil {
			return err
		}
		defer os.Remove(cc.String("socket"))
	}
	if p := cc.String("bench-unchecked-socket"); p != "" {
		log.Warn("BENCH AID: serving a socket without ownership checks; never use this in production", "socket", p)
		if srv.Unchecked, err = rpc.Listen(p, gid); err != nil {
			return err
		}
		defer os.Remove(p)
	}
	stopDocker, err := serveDocker(ctx, cc, log, srv, gid)
	if err != nil {
		return err
	}
	defer stopDocker()
	log.Info("serving", "socket", ln.Addr().String(), "init", initBin, "state_dir", cc.String("state-dir"))
	for _, rl := range srv.Remote {
		log.Info("serving", "tcp", rl.Addr().String(), "tls", rl.TLS != nil)
	}
	if _, err := systemd.Notify("READY=1"); err != nil {
		log.Warn("notify systemd", "err", err)
	}
	err = mainLoop(ctx, log, func() error { return srv.Serve(ctx, ln) })
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	log.Info("stopped; sandboxes keep running in containerd")
	return err
}

// runtimeInfo is the runc boxd runs sandboxes on.
type runtimeInfo struct {
	runc.Info
	advisories []string // its known escapes, if allowed to run anyway
}

// checkRuntime finds the runc (--runc, made absolute: the shim resolves
// a bare name on its own PATH, which need not be boxd's), asks it for its
// version and refuses one with a known container escape unless
// --allow-vulnerable-runtime.
// checkGvisor finds gVisor (--runsc and the shim next to it) and writes the
// shim's options under the state directory. A missing gVisor is not an
// error (gvisor sandboxes are then refused, saying why) unless
// --default-runtime is gvisor.
func checkGvisor(cc *cli.Context, log *slog.Logger) (_ *runtime.Gvisor, why, def string, _ error) {
	def, err := runtime.ParseRuntime("--default-runtime", cc.String("default-runtime"))
	if err != nil {
		return nil, "", "", err
	}
	info, err := gvisor.Probe(context.Background(), cc.String("runsc"))
	if err != nil {
		if def == runtime.RuntimeGvisor {
			return nil, "", "", fmt.Errorf("--default-runtime gvisor: --runsc: %w", err)
		}
		log.Info("runtime gvisor not available", "err", err)
		return nil, err.Error(), def, nil
	}
	state := cc.String("state-dir")
	root := filepath.Join(state, "gvisor", "root")
	cfg, err := gvisor.WriteConfig(filepath.Join(state, "gvisor"), info, root, filepath.Join(state, "sandboxes"))
	if err != nil {
		return nil, "", "", err
	}
	egressCfg, err := gvisor.WriteEgressConfig(filepath.Join(state, "gvisor"), info, root, filepath.Join(state, "sandboxes"))
	if err != nil {
		return nil, "", "", err
	}
	log.Info("runtime", "name", gvisor.Name, "version", info.Version, "path", info.Runsc, "shim", info.Shim, "platform", gvisor.Platform, "default", def == runtime.RuntimeGvisor)
	return &runtime.Gvisor{Info: info, ConfigPath: cfg, EgressConfigPath: egressCfg, Root: root}, "", def, nil
}

func checkRuntime(cc *cli.Context, log *slog.Logger) (runtimeInfo, error) {
	path := cc.String("runc")
	if path == "" {
		return runtimeInfo{}, errors.New("--runc: empty; name the runc binary")
	}
	abs, err := exec.LookPath(path)
	if err != nil {
		return runtimeInfo{}, fmt.Errorf("--runc: %w (scripts/setup.sh builds runc %s into %s)", err, runc.Pinned, runc.PinnedPath())
	}
	if abs, err = filepath.Abs(abs); err != nil {
		return runtimeInfo{}, fmt.Errorf("--runc: %w", err)
	}
	info, err := runc.Probe(context.Background(), abs)
	if err != nil {
		return runtimeInfo{}, fmt.Errorf("--runc: %w", err)
	}
	rt := runtimeInfo{Info: info}
	if err := runc.Check(info); err != nil {
		if !cc.Bool("allow-vulnerable-runtime") {
			return runtimeInfo{}, fmt.Errorf("refusing to start: %w", err)
		}
		for _, a := range runc.Vulnerable(info.Version) {
			rt.advisories = append(rt.advisories, a.CVE)
		}
		log.Warn("runtime has known container escapes; running on it anyway (--allow-vulnerable-runtime)", "runtime", runc.Name, "version", info.Version.String(), "path", abs, "cves", strings.Join(rt.advisories, ","))
	}
	log.Info("runtime", "name", runc.Name, "version", info.Version.String(), "commit", info.Commit, "path", abs)
	return rt, nil
}

// hostMemory caps a sandbox's memory request at the host's RAM.
func hostMemory() int64 {
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err != nil {
		return 0
	}
	return int64(si.Totalram) * int64(si.Unit)
}

// newNetwork reads the egress flags. Nothing on the host changes until the
// first egress sandbox.
func newNetwork(cc *cli.Context, log *slog.Logger) (*network.Manager, error) {
	subnet, err := netip.ParsePrefix(cc.String("bridge-subnet"))
	if err != nil {
		return nil, fmt.Errorf("--bridge-subnet: %w", err)
	}
	var subnet6 netip.Prefix
	if v := cc.String("bridge-subnet6"); v != "" {
		if subnet6, err = netip.ParsePrefix(v); err != nil {
			return nil, fmt.Errorf("--bridge-subnet6: %w", err)
		}
	}
	block, err := blockFlag(cc)
	if err != nil {
		return nil, err
	}
	store, err := secrets.Open(filepath.Join(cc.String("state-dir"), "secrets"))
	if err != nil {
		return nil, err
	}
	ca, err := secrets.LoadCA(filepath.Join(cc.String("state-dir"), "secrets-ca"))
	if err != nil {
		return nil, err
	}
	m, err := network.New(network.Config{
		Secrets: store, CA: ca,
		Subnet6:     subnet6,
		StateDir:    filepath.Join(cc.String("state-dir"), "network"),
		PluginDirs:  filepath.SplitList(cc.String("cni-plugin-dir")),
		Bridge:      cc.String("bridge"),
		Subnet:      subnet,
		Table:       names(cc).NftTable,
		CNICacheDir: names(cc).CNICacheDir,
		DNSUpstream: cc.String("dns-upstream"),
		Block:       block,
		Logger:      log,
	})
	if err != nil {
		return nil, fmt.Errorf("network: %w", err)
	}
	return m, nil
}

// blockFlag reads --block: what the administrator adds to the
// always-blocked set, for sandboxes and for where a registry may send boxd.
func blockFlag(cc *cli.Context) ([]netip.Prefix, error) {
	var block []netip.Prefix
	for _, v := range cc.StringSlice("block") {
		p, err := network.ParseBlock(v)
		if err != nil {
			return nil, fmt.Errorf("--block: %w", err)
		}
		block = append(block, p)
	}
	return block, nil
}

// newRegistry reads the registry flags; a CA that cannot be read stops
// boxd at start-up.
func newRegistry(cc *cli.Context, images *snapshot.Store) (*registry.Registry, error) {
	maxSize, err := runtime.ParseSize(cc.String("max-image-size"))
	if err != nil {
		return nil, fmt.Errorf("--max-image-size: %w", err)
	}
	if cc.Duration("registry-timeout") <= 0 {
		return nil, fmt.Errorf("--registry-timeout: %v must be positive", cc.Duration("registry-timeout"))
	}
	// Part of the always-blocked set a registry may not send boxd to;
	// newNetwork has already refused a bad value.
	subnet, _ := netip.ParsePrefix(cc.String("bridge-subnet"))
	block, _ := blockFlag(cc)
	return registry.New(images, registry.Config{
		BridgeSubnet: subnet,
		Block:        block,
		Insecure:     cc.StringSlice("insecure-registry"),
		CAs:          cc.StringSlice("registry-ca"),
		Timeout:      cc.Duration("registry-timeout"),
		MaxImageSize: maxSize,
	})
}

// mainLoop serves until serve returns, pinging systemd's watchdog
// (WatchdogSec= in the unit) at half its interval from this goroutine, so
// a boxd whose main loop is stuck is restarted, and telling systemd when
// the drain starts.
func mainLoop(ctx context.Context, log *slog.Logger, serve func() error) error {
	done := make(chan error, 1)
	go func() { done <- serve() }()
	var tick <-chan time.Time
	if d, ok := systemd.WatchdogInterval(); ok {
		t := time.NewTicker(d / 2)
		defer t.Stop()
		tick = t.C
		log.Info("systemd watchdog", "interval", d, "ping_every", d/2)
	}
	stopping := ctx.Done()
	for {
		select {
		case err := <-done:
			return err
		case <-stopping:
			stopping = nil
			_, _ = systemd.Notify("STOPPING=1")
		case <-tick:
			if _, err := systemd.Notify("WATCHDOG=1"); err != nil {
				log.Warn("systemd watchdog", "err", err)
			}
		}
	}
}
