//go:build linux

package main

// A/B: with BENCH_AB=DIR (the bin directory of another build, `make build
// BIN=DIR` of the commit to compare with: boxd, boxd-init, boxctl and
// boxctl-full), the files scenario also runs that build's boxd on the same
// containerd, in its own namespace, and measures its boxctl cp and API
// next to this build's in the same rounds. Gains are shown against the
// base in one run, under the same load.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/boxd-dev/boxd/internal/rpcclient"
	"github.com/boxd-dev/boxd/internal/testenv"
)

// abNamespace is the containerd namespace of the base boxd.
const abNamespace = namespace + "-ab"

// abBoxd is the base build's boxd.
type abBoxd struct {
	dir, sock, boxctl string
	proc              *daemon
	api               boxdAPI
}

// startAB starts the boxd of the build in bin, or returns nil without
// BENCH_AB.
func startAB(ctx context.Context, e *env) (*abBoxd, error) {
	bin := os.Getenv("BENCH_AB")
	if bin == "" {
		return nil, nil
	}
	for _, f := range []string{"boxd", "boxd-init", "boxctl", "boxctl-full"} {
		if _, err := os.Stat(filepath.Join(bin, f)); err != nil {
			return nil, fmt.Errorf("BENCH_AB: %w (want a `make build BIN=DIR` directory)", err)
		}
	}
	a := &abBoxd{dir: filepath.Join(e.dir, "ab"), boxctl: filepath.Join(bin, "boxctl")}
	if err := os.MkdirAll(a.dir, 0o711); err != nil {
		return nil, err
	}
	a.sock = filepath.Join(a.dir, "boxd.sock")
	logPath := filepath.Join(a.dir, "boxd.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(filepath.Join(bin, "boxd"), "--socket", a.sock, "--containerd", e.ctrd.Address,
		"--namespace", abNamespace, "--state-dir", filepath.Join(a.dir, "state"),
		"--init-binary", filepath.Join(bin, "boxd-init"), "--runc", testenv.Runc, "--default-image", image,
		"--warm-pool", "0") // no pool members in the base's namespace, whichever build it is
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if a.proc, err = startDaemon(cmd); err != nil {
		return nil, fmt.Errorf("base boxd: %w", err)
	}
	_ = os.WriteFile(filepath.Join(a.dir, "boxd.pid"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
	a.api = boxdAPI{c: rpcclient.New(a.sock)}
	if err := waitBoxd(ctx, a.api, "base boxd", logPath); err != nil {
		return nil, errors.Join(err, a.stop())
	}
	logf("A/B: base boxd from %s; importing %s into it", bin, image)
	// An earlier scenario of this run may have imported it already (its
	// base boxd used the same namespace and root file system).
	if out, err := a.boxctlCmd(ctx, "image", "import", "--rootfs", e.rootfs, "--name", image).CombinedOutput(); err != nil &&
		!strings.Contains(string(out), "already_exists") {
		return nil, errors.Join(fmt.Errorf("boxctl image import (base boxd): %v %s", err, out), a.stop())
	}
	return a, nil
}

func (a *abBoxd) boxctlCmd(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, a.boxctl, append([]string{"--socket", a.sock}, args...)...)
}

// startABSandbox is startAB with a sandbox of the base boxd's own to
// measure in; without BENCH_AB it returns nil and "". done removes the
// sandbox and stops the base boxd.
func startABSandbox(ctx context.Context, e *env) (ab *abBoxd, sb string, done func(), err error) {
	ab, err = startAB(ctx, e)
	if err != nil {
		return nil, "", nil, err
	}
	stop := func() {
		if err := ab.stop(); err != nil {
			logf("A/B: stop base boxd: %v", err)
		}
	}
	if ab == nil {
		return nil, "", stop, nil
	}
	if sb, err = ab.api.create(ctx); err != nil {
		stop()
		return nil, "", nil, fmt.Errorf("base boxd create: %w", err)
	}
	return ab, sb, func() { ab.api.remove(context.WithoutCancel(ctx), sb); stop() }, nil
}

// stop ends the base boxd.
func (a *abBoxd) stop() error {
	if a == nil || a.proc == nil {
		return nil
	}
	return a.proc.stop(15 * time.Second)
}
