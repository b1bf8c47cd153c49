//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/urfave/cli/v2"

	"github.com/boxd-dev/boxd/internal/runc"
)

// embeddedContainerd is --containerd's value that makes boxd start and
// supervise a containerd of its own.
const embeddedContainerd = "embedded"

// connectContainerd connects to --containerd: a socket path (never a
// fallback: a missing socket is an error naming both choices), or
// "embedded", a containerd boxd runs under its state dir. stop closes the
// client and stops an embedded containerd; call it after serving ends.
func connectContainerd(ctx context.Context, cc *cli.Context, log *slog.Logger) (c *client.Client, stop func(), err error) {
	addr := cc.String("containerd")
	var emb *embedded
	if addr == embeddedContainerd {
		if emb, err = newEmbedded(cc, log); err != nil {
			return nil, nil, err
		}
		addr = emb.sock
	} else if st, serr := os.Stat(addr); serr != nil || st.Mode().Type() != fs.ModeSocket {
		why := "no such socket"
		if serr == nil {
			why = "not a socket"
		}
		return nil, nil, fmt.Errorf("--containerd %s: no containerd at %s (%s): start containerd there (--containerd PATH), or run boxd --containerd embedded to have boxd start and supervise its own", addr, addr, why)
	}
	c, err = client.New(addr, client.WithDefaultNamespace(cc.String("namespace")))
	if err != nil {
		return nil, nil, fmt.Errorf("containerd at %s: %w", addr, err)
	}
	stop = func() {
		c.Close()
		if emb != nil {
			emb.stop()
		}
	}
	if emb != nil {
		// After a restart, dial at once rather than after the client's
		// backoff (up to 10 s).
		emb.restarted = func() {
			if cc, ok := c.Conn().(interface{ ResetConnectBackoff() }); ok {
				cc.ResetConnectBackoff()
			}
		}
		if err := emb.start(); err != nil {
			stop()
			return nil, nil, err
		}
	}
	// client.New dials lazily: probe now so a wrong socket fails at start.
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	serving, err := c.IsServing(pctx)
	cancel()
	if err != nil || !serving {
		stop()
		return nil, nil, fmt.Errorf("containerd at %s is not serving: %v", addr, err)
	}
	if v, err := c.Version(ctx); err == nil {
		log.Info("connected to containerd", "address", addr, "version", v.Version, "namespace", cc.String("namespace"), "embedded", emb != nil)
	}
	return c, stop, nil
}

// embedded is a containerd boxd runs as a child, the way k3s embeds one:
// its config, root, state and socket under STATE-DIR/containerd (the
// layout of scripts/containerd.sh, whose stop cleans it up too), in a
// process group of its own (a Ctrl-C to boxd's group does not reach it),
// killed if boxd dies (Pdeathsig) and restarted when it exits. The shims
// outlive it, so running sandboxes keep running while it restarts.
type embedded struct {
	dir, bin, sock, config string
	env                    []string
	log                    *slog.Logger
	restarted              func()

	cancel context.CancelFunc
	ready  chan error
	done   chan struct{}
}

// restartDelay is the pause before a restart, so a containerd that dies
// at once does not spin; the restart is well within 5 s.
const restartDelay = 300 * time.Millisecond

// pinnedContainerd is where scripts/setup.sh builds the containerd whose
// client boxd links: $BOXD_DEPS/containerd-VERSION/bin/containerd.
func pinnedContainerd() string {
	deps := os.Getenv("BOXD_DEPS")
	if deps == "" {
		deps = runc.DefaultDepsDir
	}
	version := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == "github.com/containerd/containerd/v2" {
				version = m.Version
			}
		}
	}
	return filepath.Join(deps, "containerd-"+version, "bin", "containerd")
}

func newEmbedded(cc *cli.Context, log *slog.Logger) (*embedded, error) {
	bin := pinnedContainerd()
	if _, err := os.Stat(bin); err != nil {
		p, lerr := exec.LookPath("containerd")
		if lerr != nil {
			return nil, fmt.Errorf("--containerd embedded: no containerd at %s (scripts/setup.sh builds it) nor on PATH", bin)
		}
		bin = p
	}
	dir, err := filepath.Abs(filepath.Join(cc.String("state-dir"), "containerd"))
	if err != nil {
		return nil, fmt.Errorf("--containerd embedded: %w", err)
	}
	e := &embedded{dir: dir, bin: bin, sock: filepath.Join(dir, "containerd.sock"), config: filepath.Join(dir, "config.toml"), log: log}
	if len(e.sock) > 100 {
		return nil, fmt.Errorf("--containerd embedded: socket %s is too long for a Unix socket: use a shorter --state-dir", e.sock)
	}
	for _, d := range []string{dir, filepath.Join(dir, "root"), filepath.Join(dir, "state"), filepath.Join(dir, "tmp")} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			return nil, fmt.Errorf("--containerd embedded: %w", err)
		}
	}
	// runc enters each rootfs (under DIR/state) as the sandbox's mapped
	// root, which must traverse the state dir and DIR: search, not read.
	for _, d := range []string{filepath.Dir(dir), dir} {
		if st, err := os.Stat(d); err == nil && st.Mode().Perm()&0o011 != 0o011 {
			if err := os.Chmod(d, st.Mode().Perm()|0o011); err != nil {
				return nil, fmt.Errorf("--containerd embedded: %w", err)
			}
		}
	}
	binDir := filepath.Dir(bin)
	runcDir := filepath.Dir(cc.String("runc"))
	shimPath := strings.Join([]string{binDir, runcDir, "/usr/sbin", "/usr/bin", "/sbin", "/bin"}, ":")
	if err := os.WriteFile(e.config, []byte(containerdConfig(dir, e.sock, shimPath)), 0o600); err != nil {
		return nil, fmt.Errorf("--containerd embedded: %w", err)
	}
	// scripts/containerd.sh stop DIR finds ctr through this file.
	_ = os.WriteFile(filepath.Join(dir, "bindir"), []byte(binDir+"\n"), 0o644)
	e.env = []string{"PATH=" + shimPath}
	return e, nil
}

// containerdConfig is scripts/containerd.sh's configuration: nothing of
// the host's containerd (root, state, socket, conf.d), no CRI, NRI or
// tracing; the shims find the pinned runc on PATH.
func containerdConfig(dir, sock, shimPath string) string {
	return fmt.Sprintf(`# Written by boxd --containerd embedded at every start; do not edit.
version = 3
root = %[1]q
state = %[2]q
temp = %[3]q
imports = []
disabled_plugins = [
  "io.containerd.grpc.v1.cri",
  "io.containerd.cri.v1.images",
  "io.containerd.cri.v1.runtime",
  "io.containerd.podsandbox.controller.v1.podsandbox",
  "io.containerd.nri.v1.nri",
  "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.internal.v1.tracing",
  "io.containerd.internal.v1.opt",
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.blockfile",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.erofs",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.differ.v1.erofs",
  "io.containerd.mount-handler.v1.erofs",
]
required_plugins = ["io.containerd.snapshotter.v1.overlayfs", "io.containerd.runtime.v2.task"]

[grpc]
  address = %[4]q

[ttrpc]
  address = %[5]q

[debug]
  address = ""

[metrics]
  address = ""

[plugins]
  [plugins."io.containerd.snapshotter.v1.overlayfs"]
    slow_chown = true
  [plugins."io.containerd.image-verifier.v1.bindir"]
    bin_dir = %[6]q
  [plugins."io.containerd.shim.v1.manager"]
    env = [%[7]q]
  [plugins."io.containerd.service.v1.diff-service"]
    default = ["walking"]
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), filepath.Join(dir, "tmp"), sock, sock+".ttrpc",
		filepath.Join(dir, "image-verifier"), "PATH="+shimPath)
}

// start runs containerd and returns once it answers (or failed to);
// from then on the supervisor restarts it whenever it exits.
func (e *embedded) start() error {
	e.killStale()
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel, e.ready, e.done = cancel, make(chan error, 1), make(chan struct{})
	go e.supervise(ctx)
	if err := <-e.ready; err != nil {
		cancel()
		<-e.done
		return err
	}
	return nil
}

// stop ends containerd (SIGTERM, SIGKILL after 10 s). Sandboxes keep
// running in their shims.
func (e *embedded) stop() {
	if e.cancel != nil {
		e.cancel()
		<-e.done
	}
}

// supervise starts containerd, and again each time it exits, until ctx
// ends. Its OS thread stays locked: Pdeathsig follows the thread that
// forked, which must live as long as boxd.
func (e *embedded) supervise(ctx context.Context) {
	goruntime.LockOSThread()
	defer close(e.done)
	first := true
	for {
		cmd, exited, err := e.spawn()
		if err == nil {
			err = e.waitServing(ctx, exited)
		}
		if first {
			e.ready <- err
			first = false
			if err != nil {
				e.end(cmd, exited)
				return
			}
		} else if err != nil {
			e.log.Error("embedded containerd: restart failed; trying again", "err", err)
		} else {
			e.log.Info("embedded containerd restarted", "pid", cmd.Process.Pid)
			if e.restarted != nil {
				e.restarted()
			}
		}
		select {
		case <-ctx.Done():
			e.end(cmd, exited)
			return
		case <-exited:
			e.log.Warn("embedded containerd exited; restarting", "state", cmd.ProcessState.String(), "log", filepath.Join(e.dir, "containerd.log"))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(restartDelay):
		}
	}
}

// spawn starts containerd; exited is closed when it has exited.
func (e *embedded) spawn() (*exec.Cmd, chan struct{}, error) {
	logf, err := os.OpenFile(filepath.Join(e.dir, "containerd.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("embedded containerd: %w", err)
	}
	defer logf.Close()
	_ = os.Remove(e.sock)
	_ = os.Remove(e.sock + ".ttrpc")
	cmd := exec.Command(e.bin, "--config", e.config)
	cmd.Env, cmd.Stdout, cmd.Stderr = e.env, logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("embedded containerd: %w", err)
	}
	_ = os.WriteFile(filepath.Join(e.dir, "containerd.pid"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	return cmd, exited, nil
}

// waitServing waits up to 20 s for the socket to answer.
func (e *embedded) waitServing(ctx context.Context, exited chan struct{}) error {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(e.sock); err == nil {
			c, err := client.New(e.sock, client.WithTimeout(time.Second))
			if err == nil {
				pctx, cancel := context.WithTimeout(ctx, time.Second)
				ok, _ := c.IsServing(pctx)
				cancel()
				c.Close()
				if ok {
					return nil
				}
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("embedded containerd exited at start; see %s", filepath.Join(e.dir, "containerd.log"))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("embedded containerd did not answer on %s within 20s; see %s", e.sock, filepath.Join(e.dir, "containerd.log"))
}

// end stops cmd: SIGTERM, then SIGKILL after 10 s.
func (e *embedded) end(cmd *exec.Cmd, exited chan struct{}) {
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// killStale kills a containerd a previous boxd left running on this
// config (its Pdeathsig missed), which would hold the root's lock.
func (e *embedded) killStale() {
	b, err := os.ReadFile(filepath.Join(e.dir, "containerd.pid"))
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || !bytes.Contains(cmdline, []byte(e.config)) {
		return
	}
	e.log.Warn("embedded containerd: killing one left running", "pid", pid)
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for i := 0; i < 100; i++ {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}
