//go:build linux

package e2e

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/boxd-dev/boxd/internal/testenv"
)

// TestMakeInstall: make install with DESTDIR and PREFIX stages the
// programs, boxd-init, the units (pointing at PREFIX, with the watchdog)
// and a default config that the installed boxd reads; a second install
// keeps an edited config.
func TestMakeInstall(t *testing.T) {
	dest := t.TempDir()
	install := func() {
		t.Helper()
		cmd := exec.Command("make", "-s", "-C", testenv.RepoRoot(), "install", "DESTDIR="+dest, "PREFIX=/opt/bx", "BIN="+filepath.Dir(env.boxd))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("make install: %v\n%s", err, out)
		}
	}
	install()
	for path, mode := range map[string]os.FileMode{
		"opt/bx/bin/boxd": 0o755, "opt/bx/bin/boxctl": 0o755, "opt/bx/bin/boxctl-full": 0o755, "opt/bx/bin/boxctl-mcp": 0o755,
		"opt/bx/libexec/boxd/boxd-init": 0o755, "opt/bx/share/doc/boxd/README.md": 0o644,
		"opt/bx/share/doc/boxd/CHANGELOG.md": 0o644, "opt/bx/share/doc/boxd/docs/security.md": 0o644,
		"lib/systemd/system/boxd.service": 0o644, "lib/systemd/system/boxd.socket": 0o644, "etc/boxd/config.toml": 0o644,
	} {
		st, err := os.Stat(filepath.Join(dest, path))
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if st.Mode().Perm() != mode {
			t.Errorf("%s: mode %v, want %v", path, st.Mode().Perm(), mode)
		}
	}
	unit, _ := os.ReadFile(filepath.Join(dest, "lib/systemd/system/boxd.service"))
	for _, want := range []string{"Type=notify", "ExecStart=/opt/bx/bin/boxd --config /etc/boxd/config.toml", "WatchdogSec=", "NoNewPrivileges=yes"} {
		if !strings.Contains(string(unit), want) {
			t.Errorf("boxd.service lacks %q:\n%s", want, unit)
		}
	}
	if strings.Contains(string(unit), "@") {
		t.Errorf("boxd.service has an unreplaced placeholder:\n%s", unit)
	}
	if conf, _ := os.ReadFile(filepath.Join(dest, "etc/boxd/config.toml")); !strings.Contains(string(conf), "\ncontainerd = \"embedded\"\n") {
		t.Errorf("the installed config does not run an embedded containerd:\n%s", conf)
	}
	// The installed boxd accepts the installed config: it gets as far as
	// containerd (absent here), not stopping on a setting.
	conf := filepath.Join(dest, "etc/boxd/config.toml")
	out, err := exec.Command(filepath.Join(dest, "opt/bx/bin/boxd"), "--config", conf,
		"--containerd", filepath.Join(dest, "no-containerd.sock"), "--state-dir", filepath.Join(dest, "state"),
		"--init-binary", filepath.Join(dest, "opt/bx/libexec/boxd/boxd-init"), "--socket", filepath.Join(dest, "b.sock")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "containerd at") {
		t.Errorf("installed boxd with the installed config: %v\n%s", err, out)
	}
	// An edited config survives a reinstall.
	if err := os.WriteFile(conf, []byte("debug = true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	install()
	if b, _ := os.ReadFile(conf); string(b) != "debug = true\n" {
		t.Errorf("reinstall replaced the edited config: %q", b)
	}
}

// TestMalformedConfig: a config boxd cannot take stops it before it
// serves, naming the file, line and key.
func TestMalformedConfig(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(conf, []byte("socket-group = \"root\"\nmax-sandboxes-per-user = 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "boxd.sock")
	run := func() string {
		cmd := exec.Command(env.boxd, "--config", conf, "--socket", sock, "--containerd", env.ctrd.Address, "--namespace", "boxd-e2e-conf",
			"--state-dir", filepath.Join(dir, "state"), "--init-binary", env.initBin)
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("boxd started with %s", conf)
		}
		if _, err := os.Stat(sock); err == nil {
			t.Errorf("boxd made its socket although its config is bad")
		}
		return string(out)
	}
	// A value the flag takes but boxd refuses: named as the flag.
	if out := run(); !strings.Contains(out, "max-sandboxes-per-user") || !strings.Contains(out, "positive") {
		t.Errorf("quota 0 in the config: %s", out)
	}
	if err := os.WriteFile(conf, []byte("socket-group = \"root\"\nmax-sandboxes = \"lots\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := run(); !strings.Contains(out, conf+":2") || !strings.Contains(out, "key max-sandboxes") {
		t.Errorf("bad value: %s", out)
	}
}

// TestWatchdogPings: under a service manager that set WATCHDOG_USEC, boxd
// sends READY=1 and then WATCHDOG=1 within half the interval, again and
// again.
func TestWatchdogPings(t *testing.T) {
	dir := t.TempDir()
	notifyPath := filepath.Join(dir, "notify.sock")
	notify, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: notifyPath, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer notify.Close()
	cmd := exec.Command(env.boxd, "--socket", filepath.Join(dir, "run", "boxd.sock"), "--containerd", env.ctrd.Address, "--namespace", "boxd-e2e-wd",
		"--state-dir", filepath.Join(dir, "state"), "--init-binary", env.initBin, "--runc", testenv.Runc, "--expiry-interval", "1h")
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+notifyPath, "WATCHDOG_USEC=400000")
	logf, _ := os.Create(filepath.Join(dir, "boxd.log"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() }()
	var got []string
	var pings []time.Time
	buf := make([]byte, 256)
	deadline := time.Now().Add(30 * time.Second)
	for len(pings) < 3 && time.Now().Before(deadline) {
		_ = notify.SetReadDeadline(deadline)
		n, _, err := notify.ReadFrom(buf)
		if err != nil {
			break
		}
		msg := string(buf[:n])
		got = append(got, msg)
		if msg == "WATCHDOG=1" {
			if !strings.Contains(strings.Join(got, ","), "READY=1") {
				t.Errorf("WATCHDOG=1 before READY=1: %v", got)
			}
			pings = append(pings, time.Now())
		}
	}
	if len(pings) < 3 {
		t.Fatalf("messages %v: want READY=1 then WATCHDOG=1 repeatedly\n%s", got, tail(filepath.Join(dir, "boxd.log")))
	}
}
