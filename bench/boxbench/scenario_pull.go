//go:build linux

package main

// Scenario 11: pull of an image from a registry on loopback, `boxctl image
// pull` next to `ctr image pull` of the same image from the same registry
// into the same containerd (ctr in a containerd namespace of its own, so
// the two never share content). Each pull is followed, untimed, by
// removing the image with its content and snapshots, so every sample
// downloads, stores and unpacks everything. The registry is Debian's
// docker-registry on 127.0.0.1 over plain HTTP (boxd --insecure-registry,
// ctr --plain-http), so the row measures the pull machinery, not TLS.
// ctr runs twice: as usual (containerd's transfer service downloads and
// unpacks inside containerd) and with --local (ctr's own process
// downloads through the content API and unpacks, boxd's architecture).
// boxd also reads every layer as a hostile tar while it downloads.
//
// The image is the busybox root filesystem plus pullMiB of incompressible
// data in 1,000 small files and one big file, imported into boxd and
// pushed with boxctl image push: one uncompressed layer.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

const (
	pullNamespace = namespace + "-pull" // the ctr peer's containerd namespace
	pullMiB       = 64
)

func scenarioPull(ctx context.Context, e *env, cfg *config) (l *latency, err error) {
	bin, err := exec.LookPath("docker-registry")
	if err != nil {
		return nil, fmt.Errorf("docker-registry (Debian package, installed by scripts/setup.sh) is missing: %w", err)
	}
	dir := filepath.Join(e.dir, "registry")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	cfgFile := filepath.Join(dir, "config.yml")
	conf := fmt.Sprintf("version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: %s\n",
		filepath.Join(dir, "data"), e.registryAddr)
	if err := os.WriteFile(cfgFile, []byte(conf), 0o600); err != nil {
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(dir, "registry.log"))
	if err != nil {
		return nil, err
	}
	reg := exec.Command(bin, "serve", cfgFile)
	reg.Stdout, reg.Stderr = logFile, logFile
	if err := reg.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	logFile.Close()
	defer func() {
		_ = reg.Process.Kill()
		_, _ = reg.Process.Wait()
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get("http://" + e.registryAddr + "/v2/")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("docker-registry did not answer on %s: %v", e.registryAddr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	ref := e.registryAddr + "/bench/pull:v1"
	rootfs := filepath.Join(dir, "rootfs")
	if err := pullRootfs(e.rootfs, rootfs); err != nil {
		return nil, err
	}
	if out, err := e.boxctlCmd(ctx, "image", "import", "--rootfs", rootfs, "--name", ref).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("import: %v %s", err, out)
	}
	if out, err := e.boxctlCmd(ctx, "image", "push", "-q", ref).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("push: %v %s", err, out)
	}
	if err := run(e.boxctlCmd(ctx, "image", "rm", ref)); err != nil {
		return nil, err
	}
	ctrPull := func(ctx context.Context, args ...string) *exec.Cmd {
		return exec.CommandContext(ctx, e.ctrd.Ctr, append([]string{"--address", e.ctrd.Address, "-n", pullNamespace}, args...)...)
	}
	defer func() {
		// Whatever a failed round left, and the ctr peer's namespace.
		c := context.WithoutCancel(ctx)
		_ = run(e.boxctlCmd(c, "image", "rm", ref))
		_ = run(ctrPull(c, "image", "rm", "--sync", ref))
		_ = run(exec.CommandContext(c, e.ctrd.Ctr, "--address", e.ctrd.Address, "namespaces", "rm", pullNamespace))
	}()
	l = measure(ctx, fmt.Sprintf("pull of a %d MiB image from a registry on loopback (one layer; then rm)", pullMiB), 1, max(cfg.n/5, 3), []peer{
		{name: "boxctl image pull", run: func(ctx context.Context, _ int) error {
			return run(e.boxctlCmd(ctx, "image", "pull", "-q", ref))
		}, after: func(ctx context.Context, _ int) error {
			return run(e.boxctlCmd(ctx, "image", "rm", ref))
		}},
		{name: "ctr image pull", run: func(ctx context.Context, _ int) error {
			return run(ctrPull(ctx, "image", "pull", "--plain-http", ref))
		}, after: func(ctx context.Context, _ int) error {
			return run(ctrPull(ctx, "image", "rm", "--sync", ref))
		}},
		// --local: ctr downloads in its own process and writes through
		// containerd's content API, as boxd does, instead of asking
		// containerd's transfer service to do it all inside containerd.
		{name: "ctr image pull --local", run: func(ctx context.Context, _ int) error {
			return run(ctrPull(ctx, "image", "pull", "--local", "--plain-http", ref))
		}, after: func(ctx context.Context, _ int) error {
			return run(ctrPull(ctx, "image", "rm", "--sync", ref))
		}},
	})
	return l, ctx.Err()
}

// pullRootfs copies the busybox root filesystem to dst (cp -a keeps its
// links) and adds pullMiB of incompressible data: half in 1,000 files,
// half in one.
func pullRootfs(busybox, dst string) error {
	if out, err := exec.Command("cp", "-a", busybox+"/.", dst+"/").CombinedOutput(); err != nil {
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return err
		}
		if out, err = exec.Command("cp", "-a", busybox+"/.", dst+"/").CombinedOutput(); err != nil {
			return fmt.Errorf("copy the busybox rootfs: %v %s", err, strings.TrimSpace(string(out)))
		}
	}
	data := filepath.Join(dst, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return err
	}
	rng := rand.NewChaCha8([32]byte{'b', 'o', 'x', 'd'})
	buf := make([]byte, pullMiB<<20/2)
	_, _ = rng.Read(buf)
	small := len(buf) / 1000
	for i := range 1000 {
		if err := os.WriteFile(filepath.Join(data, fmt.Sprintf("f%04d", i)), buf[i*small:(i+1)*small], 0o644); err != nil {
			return err
		}
	}
	_, _ = rng.Read(buf)
	return os.WriteFile(filepath.Join(data, "big"), buf, 0o644)
}
