//go:build linux

package main

// The default disk cap: boxd gives a create that names no disk a 10 GiB
// cap (its own sparse ext4 image, made by mkfs.ext4 at create). The time
// to interactive scenario measures the main boxd (the default) next to a
// second boxd of this build run with --default-disk 0, in the same rounds,
// so the cap's cost shows under the same load.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/boxd-dev/boxd/internal/rpcclient"
	"github.com/boxd-dev/boxd/internal/testenv"
)

// noCapNamespace is the containerd namespace of the uncapped boxd.
const noCapNamespace = namespace + "-nocap"

// noCapBoxd is this build's boxd with --default-disk 0.
type noCapBoxd struct {
	proc *daemon
	api  boxdAPI
}

func startNoCap(ctx context.Context, e *env) (*noCapBoxd, error) {
	dir := filepath.Join(e.dir, "nocap")
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return nil, err
	}
	sock, logPath := filepath.Join(dir, "boxd.sock"), filepath.Join(dir, "boxd.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(e.boxdBin, "--socket", sock, "--containerd", e.ctrd.Address,
		"--namespace", noCapNamespace, "--state-dir", filepath.Join(dir, "state"),
		"--init-binary", e.initBin, "--runc", testenv.Runc, "--default-image", image,
		"--default-disk", "0", "--warm-pool", "0")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	n := &noCapBoxd{api: boxdAPI{c: rpcclient.New(sock), label: "boxd API, --default-disk 0"}}
	if n.proc, err = startDaemon(cmd); err != nil {
		return nil, fmt.Errorf("boxd --default-disk 0: %w", err)
	}
	if err := waitBoxd(ctx, n.api, "boxd --default-disk 0", logPath); err != nil {
		return nil, errors.Join(err, n.stop())
	}
	out, err := exec.CommandContext(ctx, e.boxctl, "--socket", sock, "image", "import", "--rootfs", e.rootfs, "--name", image).CombinedOutput()
	if err != nil {
		return nil, errors.Join(fmt.Errorf("boxctl image import (boxd --default-disk 0): %v %s", err, out), n.stop())
	}
	return n, nil
}

func (n *noCapBoxd) stop() error {
	if n == nil || n.proc == nil {
		return nil
	}
	return n.proc.stop(15 * time.Second)
}

// createPeer times a create alone (the sandbox answers no command yet);
// the removal is untimed.
func createPeer(api sandboxAPI) peer {
	var id string
	return peer{
		name: api.name(),
		run: func(ctx context.Context, _ int) error {
			var err error
			id, err = api.create(ctx)
			return err
		},
		after: func(ctx context.Context, _ int) error {
			if id == "" {
				return nil
			}
			err := api.remove(ctx, id)
			id = ""
			return err
		},
	}
}
