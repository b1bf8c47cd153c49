//go:build linux

package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/boxd-dev/boxd/internal/instance"
)

// instanceFlags are --instance and --print-config.
func instanceFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "instance", EnvVars: []string{"BOXD_INSTANCE"}, Usage: "run as instance NAME (up to 10 of a-z, 0-9, '-'): every host-global name (containerd namespace, cgroup parent, uid blocks, bridge, subnet, resolver, CNI network and cache, nftables tables, state dir, socket) is derived from it, so several boxds share a host; flags given explicitly still win (default: the names boxd always had)"},
		&cli.BoolFlag{Name: "print-config", Usage: "print this instance's names (as config-file keys) and exit"},
	}
}

// derivedFlags are the flags --instance sets when they are not given.
func derivedFlags(n instance.Names) [][2]string {
	return [][2]string{
		{"namespace", n.Namespace}, {"state-dir", n.StateDir}, {"socket", n.Socket},
		{"bridge", n.Bridge}, {"bridge-subnet", n.Subnet}, {"userns-host-id", strconv.FormatUint(uint64(n.UIDBase), 10)},
	}
}

// instanceMeta is the App.Metadata key of the instance's effective names.
const instanceMeta = "boxd.instance"

// applyInstance derives the instance's names from --instance, sets the
// flags not given on the command line, in the environment or in the
// config file, and keeps the effective names (names()) for the network
// and for the operator.
func applyInstance(cc *cli.Context) error {
	n, err := instance.Derive(cc.String("instance"))
	if err != nil {
		return fmt.Errorf("--instance: %w", err)
	}
	if cc.IsSet("bridge-subnet") && cc.IsSet("userns-host-id") {
		n.Slot = 0 // both of the slot's resources chosen by hand: nothing to claim
	}
	if n.Instance != instance.Default {
		for _, f := range derivedFlags(n) {
			if !cc.IsSet(f[0]) {
				if err := cc.Set(f[0], f[1]); err != nil {
					return fmt.Errorf("--instance: set --%s: %w", f[0], err)
				}
			}
		}
	}
	// What the flags now say, explicit ones included.
	n.Namespace = cc.String("namespace")
	n.CgroupParent = "/" + n.Namespace
	n.StateDir = cc.String("state-dir")
	n.Socket = cc.String("socket")
	n.SocketDir = filepath.Dir(n.Socket)
	n.Bridge, n.CNINetwork = cc.String("bridge"), cc.String("bridge")
	n.Subnet = cc.String("bridge-subnet")
	if p, err := netip.ParsePrefix(n.Subnet); err == nil {
		n.Resolver = netip.AddrPortFrom(p.Addr().Next(), 53).String()
	}
	n.UIDBase = uint32(cc.Uint("userns-host-id"))
	if n.Instance != instance.Default {
		// The cache follows the state dir, even one given explicitly.
		n.CNICacheDir = filepath.Join(n.StateDir, "network", "cni")
	}
	if cc.App.Metadata == nil {
		cc.App.Metadata = map[string]any{}
	}
	cc.App.Metadata[instanceMeta] = n
	return nil
}

// names are the effective names applyInstance kept.
func names(cc *cli.Context) instance.Names {
	n, _ := cc.App.Metadata[instanceMeta].(instance.Names)
	return n
}

// printConfig writes the instance's names as config-file keys; those
// that are not flags (derived only) as comments.
func printConfig(w io.Writer, n instance.Names) {
	fmt.Fprintf(w, "instance = %q\n", n.Instance)
	fmt.Fprintf(w, "namespace = %q\nstate-dir = %q\nsocket = %q\n", n.Namespace, n.StateDir, n.Socket)
	fmt.Fprintf(w, "bridge = %q\nbridge-subnet = %q\nuserns-host-id = %d\n", n.Bridge, n.Subnet, n.UIDBase)
	fmt.Fprintf(w, "# derived, not settable:\n# cgroup-parent = %q\n# resolver = %q\n# nftables-table = %q\n", n.CgroupParent, n.Resolver, n.NftTable)
	fmt.Fprintf(w, "# cni-network = %q\n# cni-cache-dir = %q\n# slot = %d\n", n.CNINetwork, cacheDirOrDefault(n.CNICacheDir), n.Slot)
}

func cacheDirOrDefault(d string) string {
	if d == "" {
		return "/var/lib/cni"
	}
	return d
}

// logNames says at start which host-global names this boxd uses.
func logNames(log *slog.Logger, n instance.Names) {
	log.Info("instance", "name", n.Instance, "namespace", n.Namespace, "cgroup_parent", n.CgroupParent,
		"state_dir", n.StateDir, "socket", n.Socket, "bridge", n.Bridge, "subnet", n.Subnet, "resolver", n.Resolver,
		"nft_table", n.NftTable, "cni_network", n.CNINetwork, "cni_cache", cacheDirOrDefault(n.CNICacheDir), "uid_base", n.UIDBase)
}

// slotDir holds one lock file per instance slot in use.
const slotDir = "/run/boxd-instances"

// claimSlot holds, for boxd's life, the lock of the instance's slot (its
// subnet and uid span): two names can hash to one slot, and two running
// instances on it would share addresses and uids. The default instance
// has a slot of its own and claims nothing. The returned file keeps the
// lock; closing it (or boxd's exit) releases it.
func claimSlot(n instance.Names) (*os.File, error) {
	if n.Slot == 0 {
		return nil, nil
	}
	if err := os.MkdirAll(slotDir, 0o755); err != nil {
		return nil, fmt.Errorf("--instance: %w", err)
	}
	path := filepath.Join(slotDir, fmt.Sprintf("slot-%d", n.Slot))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("--instance: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			other := strings.TrimSpace(string(holder))
			if other == n.Instance {
				return nil, fmt.Errorf("--instance %s: that instance is already running", n.Instance)
			}
			return nil, fmt.Errorf("--instance %s: its slot %d (subnet %s, uids from %d) is in use by running instance %q; choose another name",
				n.Instance, n.Slot, n.Subnet, n.UIDBase, other)
		}
		return nil, fmt.Errorf("--instance: lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(n.Instance+"\n"), 0)
	}
	return f, nil
}
