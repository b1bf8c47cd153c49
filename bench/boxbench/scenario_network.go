//go:build linux

package main

// Scenario 9: time to interactive (create, then the first command's
// output, one at a time, as the tti row) of a sandbox with
// --network egress and an allowlist, next to the same with the default
// network none, and Docker's create with --network none (the bench's
// dockerd runs with --bridge=none, so Docker has no bridged peer).
//
// Egress needs ip_forward=1 and boxd's bridge and nftables tables, none of
// which the bench may put on the host. So, like e2e's egress tests, it runs
// a second boxd inside a network namespace it creates (nsenter --net; no
// private mount namespace, so runc sees the sandbox namespaces boxd pins),
// with ip_forward=1 only there, on the same containerd in its own
// containerd namespace. That namespace's only way out is a veth to a
// second namespace of the bench's (198.18.0.2, the benchmarking range),
// which is also its default route, so no packet can leave the machine;
// the first command (echo) sends none anyway. Both boxd peers use that
// boxd, so the row compares the network modes, not two daemons. That boxd
// keeps an egress warm pool of one (--warm-pool 1@egress): the rows
// "egress + publish" compare a create with an allowlist, a published port,
// a hostname, a default user and a workdir (what agent platforms ask)
// served by its member with the same create made cold; the
// other rows are made cold. Each pooled sample starts with the member
// ready (the refill is waited for, untimed), and the pool is drained
// before that boxd stops, so no member outlives the scenario.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"connectrpc.com/connect"

	"github.com/boxd-dev/boxd/internal/rpcclient"
	"github.com/boxd-dev/boxd/internal/testenv"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

const (
	netNamespace = namespace + "-net" // containerd namespace of the second boxd
	netBridge    = "boxdb0"
	netUpstream  = "198.18.0.2" // the other end of the namespace's only link
	netAllow     = netUpstream + "/32"
)

// netBoxd is the second boxd and the network namespaces it lives in.
type netBoxd struct {
	tag, b, h    string // name prefix; boxd's netns; the upstream's netns
	dir, sock    string
	proc         *exec.Cmd
	api          boxdAPI
	madeB, madeH bool
}

// boxdModeAPI creates sandboxes in one network mode.
type boxdModeAPI struct {
	boxdAPI
	mode  string
	allow []string
	// agent: a published port, a hostname, a user and a workdir too, as
	// agent platforms ask; pooled: may be served by the egress pool's
	// member.
	agent, pooled bool
}

func (b boxdModeAPI) name() string {
	switch {
	case b.agent && b.pooled:
		return "boxd, egress + publish, from the warm pool"
	case b.agent:
		return "boxd, egress + publish, cold"
	}
	return "boxd, network " + b.mode
}

func (b boxdModeAPI) create(ctx context.Context) (string, error) {
	req := &boxdv1.CreateSandboxRequest{Labels: map[string]string{"boxbench": "1"}, Cold: !b.pooled}
	if b.mode != "none" {
		req.Network = &boxdv1.NetworkRequest{Mode: b.mode, Allow: b.allow}
	}
	if b.agent {
		req.Publish, req.Hostname = []*boxdv1.PublishedPort{{Port: 8080}}, "agent"
		req.User, req.Workdir = "sandbox", "/workspace/agent"
	}
	r, err := b.c.CreateSandbox(ctx, connect.NewRequest(req))
	if err != nil {
		return "", err
	}
	return r.Msg.Sandbox.Id, nil
}

func scenarioNetwork(ctx context.Context, e *env, cfg *config) (l *latency, err error) {
	nb := &netBoxd{tag: fmt.Sprintf("bxb%d", os.Getpid()%100000), dir: filepath.Join(e.dir, "net")}
	defer func() {
		if derr := nb.down(); derr != nil {
			err = errors.Join(err, derr)
		}
	}()
	if err := nb.up(ctx, e); err != nil {
		return nil, err
	}
	if err := checkEgressNIC(ctx, nb.api); err != nil {
		return nil, err
	}
	pooled := ttiPeer(boxdModeAPI{boxdAPI: nb.api, mode: "egress", allow: []string{netAllow}, agent: true, pooled: true})
	after := pooled.after
	pooled.after = func(ctx context.Context, i int) error {
		if err := after(ctx, i); err != nil {
			return err
		}
		return waitPoolAt(ctx, nb.sock, 1, time.Minute)
	}
	if err := waitPoolAt(ctx, nb.sock, 1, time.Minute); err != nil {
		return nil, err
	}
	peers := []peer{
		ttiPeer(boxdModeAPI{boxdAPI: nb.api, mode: "none"}),
		ttiPeer(boxdModeAPI{boxdAPI: nb.api, mode: "egress", allow: []string{netAllow}}),
		pooled,
		ttiPeer(boxdModeAPI{boxdAPI: nb.api, mode: "egress", allow: []string{netAllow}, agent: true}),
		ttiPeer(e.docker),
	}
	l = measure(ctx, "time to interactive by network mode (create + first command)", cfg.warm, cfg.ttiN, peers)
	if a, b := quantile(l.samples["boxd, network none"], 0.5), quantile(l.samples["boxd, network egress"], 0.5); a > 0 && b > 0 {
		logf("%s: egress adds %s to the median (target: at most 30 ms)", l.scenario, ms(b-a))
	}
	if a := quantile(l.samples["boxd, egress + publish, from the warm pool"], 0.5); a > 0 {
		logf("%s: egress + publish from the warm pool: median %s (target: at most 30 ms)", l.scenario, ms(a))
	}
	if derr := nb.drainPool(ctx, e); derr != nil {
		err = errors.Join(err, derr)
	}
	if ids, lerr := nb.api.list(context.WithoutCancel(ctx)); lerr != nil || len(ids) > 0 {
		err = errors.Join(err, fmt.Errorf("boxd in netns %s: sandboxes left: %v %v", nb.b, ids, lerr))
	}
	return l, errors.Join(err, ctx.Err())
}

func ipRun(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// up makes the two namespaces and their link, sets ip_forward in boxd's,
// starts boxd there and imports the image into it.
func (nb *netBoxd) up(ctx context.Context, e *env) error {
	nb.b, nb.h = nb.tag+"-b", nb.tag+"-h"
	if err := os.MkdirAll(nb.dir, 0o711); err != nil {
		return err
	}
	// Named for the sweep of a run that died (sweepStale).
	if err := os.WriteFile(filepath.Join(nb.dir, "netns"), []byte(nb.b+"\n"+nb.h+"\n"), 0o644); err != nil {
		return err
	}
	if err := ipRun("netns", "add", nb.b); err != nil {
		return err
	}
	nb.madeB = true
	if err := ipRun("netns", "add", nb.h); err != nil {
		return err
	}
	nb.madeH = true
	steps := [][]string{
		{"-n", nb.b, "link", "set", "lo", "up"},
		{"-n", nb.h, "link", "set", "lo", "up"},
		// Made inside B, so no interface ever exists on the host.
		{"-n", nb.b, "link", "add", nb.tag + "b", "type", "veth", "peer", "name", nb.tag + "h", "netns", nb.h},
		{"-n", nb.b, "addr", "add", "198.18.0.1/24", "dev", nb.tag + "b"},
		{"-n", nb.h, "addr", "add", netUpstream + "/24", "dev", nb.tag + "h"},
		{"-n", nb.b, "link", "set", nb.tag + "b", "up"},
		{"-n", nb.h, "link", "set", nb.tag + "h", "up"},
		{"-n", nb.b, "route", "add", "default", "via", netUpstream},
	}
	for _, s := range steps {
		if err := ipRun(s...); err != nil {
			return err
		}
	}
	// /proc/sys/net is the writer's network namespace's: this is B's.
	if out, err := exec.Command("nsenter", "--net=/run/netns/"+nb.b, "--", "sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward").CombinedOutput(); err != nil {
		return fmt.Errorf("ip_forward in %s: %v: %s", nb.b, err, out)
	}
	nb.sock = filepath.Join(nb.dir, "boxd.sock")
	logPath := filepath.Join(nb.dir, "boxd.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	// The none rows are cold (no pool of none members); the egress pool's
	// member serves the pooled row only (the others ask for cold).
	if err := nb.startBoxd(ctx, e, logFile, "--warm-pool", "0", "--warm-pool", "1@egress"); err != nil {
		return err
	}
	logf("importing %s into the boxd in netns %s", image, nb.b)
	if out, err := exec.CommandContext(ctx, e.boxctl, "--socket", nb.sock, "image", "import", "--rootfs", e.rootfs, "--name", image).CombinedOutput(); err != nil {
		return fmt.Errorf("boxctl image import (netns boxd): %v %s", err, out)
	}
	return nil
}

// startBoxd starts the boxd in B with pools (its --warm-pool flags) and
// waits for its socket.
func (nb *netBoxd) startBoxd(ctx context.Context, e *env, logFile *os.File, pools ...string) error {
	args := append([]string{"--net=/run/netns/" + nb.b, "--", e.boxdBin,
		"--socket", nb.sock, "--containerd", e.ctrd.Address, "--namespace", netNamespace,
		"--state-dir", filepath.Join(nb.dir, "state"), "--init-binary", e.initBin, "--runc", testenv.Runc,
		"--default-image", image, "--bridge", netBridge, "--bridge-subnet", "10.214.0.0/24",
		"--dns-upstream", netUpstream + ":53"}, pools...)
	cmd := exec.Command("nsenter", args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("boxd in %s: %w", nb.b, err)
	}
	nb.proc = cmd
	// nsenter execs boxd in its place: this is boxd's pid.
	_ = os.WriteFile(filepath.Join(nb.dir, "boxd.pid"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
	nb.api = boxdAPI{c: rpcclient.New(nb.sock)}
	return waitBoxd(ctx, nb.api, "boxd in "+nb.b, logFile.Name())
}

// drainPool restarts the boxd in B without its egress pool: at start it
// destroys the member it has no use for, with its network namespace;
// drainPool waits until no namespace pin is left.
func (nb *netBoxd) drainPool(ctx context.Context, e *env) error {
	_ = nb.proc.Process.Signal(syscall.SIGTERM)
	_ = nb.proc.Wait()
	nb.proc = nil
	logFile, err := os.OpenFile(filepath.Join(nb.dir, "boxd.log"), os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	if err := nb.startBoxd(context.WithoutCancel(ctx), e, logFile, "--warm-pool", "0"); err != nil {
		return err
	}
	pins := filepath.Join(nb.dir, "state", "network", "netns")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		left, _ := os.ReadDir(pins)
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("boxd in %s: pool member's network left after a restart without its pool: %v", nb.b, left)
		}
	}
}

// down stops that boxd, removes its containerd namespace's image and the
// network namespaces (which takes boxd's bridge, veths and nftables tables
// with them), and checks libcni's host-wide result cache holds nothing of
// its bridge.
func (nb *netBoxd) down() error {
	var errs []error
	if nb.proc != nil {
		_ = nb.proc.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = nb.proc.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = nb.proc.Process.Kill()
			<-done
			errs = append(errs, fmt.Errorf("boxd in %s did not stop within 20 s of SIGTERM", nb.b))
		}
	}
	for _, n := range []struct {
		name string
		made bool
	}{{nb.b, nb.madeB}, {nb.h, nb.madeH}} {
		if n.made {
			if err := ipRun("netns", "del", n.name); err != nil {
				errs = append(errs, err)
			}
		}
	}
	cache, _ := os.ReadDir("/var/lib/cni/results")
	for _, f := range cache {
		if strings.HasPrefix(f.Name(), netBridge+"-") {
			errs = append(errs, fmt.Errorf("libcni result cache left: /var/lib/cni/results/%s", f.Name()))
			_ = os.Remove(filepath.Join("/var/lib/cni/results", f.Name()))
		}
	}
	return errors.Join(errs...)
}

// checkEgressNIC makes sure the egress row measures what it says: an egress
// sandbox has an interface besides loopback and a default route, and a
// none one has neither.
func checkEgressNIC(ctx context.Context, api boxdAPI) error {
	for _, m := range []boxdModeAPI{{boxdAPI: api, mode: "egress", allow: []string{netAllow}}, {boxdAPI: api, mode: "none"}} {
		id, err := m.create(ctx)
		if err != nil {
			return fmt.Errorf("%s: create: %w", m.name(), err)
		}
		out, err := execOK(ctx, m, id, "sh", "-c", "ls /sys/class/net; ip route")
		if rerr := m.remove(context.WithoutCancel(ctx), id); err == nil {
			err = rerr
		}
		if err != nil {
			return fmt.Errorf("%s: %w", m.name(), err)
		}
		hasNIC := strings.TrimSpace(strings.ReplaceAll(string(out), "lo\n", "")) != ""
		hasRoute := strings.Contains(string(out), "default")
		if (m.mode == "egress") != (hasNIC && hasRoute) {
			return fmt.Errorf("%s: interfaces and routes in the sandbox: %q", m.name(), out)
		}
	}
	return nil
}
