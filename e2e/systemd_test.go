//go:build linux

package e2e

import (
	"github.com/boxd-dev/boxd/internal/testenv"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/boxd-dev/boxd/internal/rpcclient"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"

	"connectrpc.com/connect"
)

// TestSocketActivationAndNotify starts boxd the way systemd does with
// boxd.socket and Type=notify: the listening socket arrives as fd 3 with
// LISTEN_PID/LISTEN_FDS, and READY=1 goes to NOTIFY_SOCKET.
func TestSocketActivationAndNotify(t *testing.T) {
	dir := t.TempDir()
	sockPath := filepath.Join(dir, "activated.sock")
	ln, err := net.Listen("unix", sockPath)
	if err != nil {
		t.Fatal(err)
	}
	lnFile, err := ln.(*net.UnixListener).File()
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close() // boxd holds the duplicate in lnFile
	notifyPath := filepath.Join(dir, "notify.sock")
	notify, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: notifyPath, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer notify.Close()

	// LISTEN_PID must be boxd's own pid: the shell execs boxd in place.
	cmd := exec.Command("sh", "-c", `LISTEN_PID=$$ LISTEN_FDS=1 exec "$@"`, "sh", env.boxd,
		"--socket", filepath.Join(dir, "unused", "boxd.sock"), "--containerd", env.ctrd.Address, "--namespace", namespace,
		"--state-dir", filepath.Join(dir, "state"), "--init-binary", env.initBin, "--runc", testenv.Runc, "--expiry-interval", "1h", "--warm-pool", "0")
	cmd.ExtraFiles = []*os.File{lnFile}
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+notifyPath)
	logf, _ := os.Create(filepath.Join(dir, "boxd.log"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lnFile.Close()
	defer func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() }()

	_ = notify.SetReadDeadline(time.Now().Add(20 * time.Second))
	buf := make([]byte, 256)
	n, _, err := notify.ReadFrom(buf)
	if err != nil || !strings.Contains(string(buf[:n]), "READY=1") {
		t.Fatalf("no READY=1 from boxd: %q %v\n%s", buf[:n], err, tail(filepath.Join(dir, "boxd.log")))
	}
	api := rpcclient.New(sockPath)
	if _, err := api.ListSandboxes(ctx(t), connect.NewRequest(&boxdv1.ListSandboxesRequest{})); err != nil {
		t.Fatalf("API on the activated socket: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "unused", "boxd.sock")); err == nil {
		t.Errorf("boxd created its own socket although systemd passed one")
	}
}
