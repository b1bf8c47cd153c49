//go:build linux

package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/boxd-dev/boxd/agent/wire"
	"github.com/boxd-dev/boxd/internal/testenv"
)

// trap is a Unix listener on the host that counts who connects: boxd
// reaching it means a sandbox steered boxd's dial.
type trap struct {
	path string
	hits atomic.Int32
}

func newTrap(t *testing.T) *trap {
	t.Helper()
	tr := &trap{path: filepath.Join(t.TempDir(), "trap.sock")}
	ln, err := net.Listen("unix", tr.path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tr.hits.Add(1)
			c.Close()
		}
	}()
	return tr
}

// sockHelper builds testdata/sockhelper statically and copies it into the
// sandbox as /tmp/sockhelper: busybox's nc has no Unix sockets.
func sockHelper(t *testing.T, id string) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sockhelper")
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = "/usr/local/go/bin/go"
	}
	cmd := exec.Command(goBin, "build", "-o", bin, "./e2e/testdata/sockhelper")
	cmd.Dir = testenv.RepoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build sockhelper: %v\n%s", err, out)
	}
	if _, err := boxctl(nil, "cp", bin, id+":/tmp/sockhelper"); err != nil {
		t.Fatal(err)
	}
	sh(t, id, "chmod 755 /tmp/sockhelper")
}

// listenScript starts sockhelper in the background at path and fails
// unless it is listening there.
func listenScript(path, tag string) string {
	return "setsid /tmp/sockhelper listen " + path + " /tmp/hits." + tag + " </dev/null >/tmp/listen." + tag + " 2>&1 & " +
		"sleep 0.3; cat /tmp/listen." + tag + " >&2; grep -q listening /tmp/listen." + tag
}

// refusedAttempts runs each script as root in sandbox id: each must fail,
// and because the kernel refused it (not because the channel broke).
func refusedAttempts(t *testing.T, id string, attempts []struct{ name, script string }) {
	t.Helper()
	refusals := []string{"read-only file system", "permission denied", "operation not permitted", "busy"}
	for _, tc := range attempts {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, code := boxctlRun("exec", "--timeout", "10s", id, "--", "sh", "-c", tc.script)
			if code == 0 {
				t.Fatalf("%q succeeded as sandbox root: %s%s", tc.script, out, stderr)
			}
			refused := false
			for _, r := range refusals {
				refused = refused || strings.Contains(strings.ToLower(stderr), r)
			}
			if !refused {
				t.Errorf("%q failed, but not because the kernel refused it (exit %d): %q", tc.script, code, stderr)
			}
		})
	}
}

// stillTheInit checks that boxd reaches sandbox id's real init: real exit
// codes, output and file contents.
func stillTheInit(t *testing.T, id string) (token string) {
	t.Helper()
	b := make([]byte, 8)
	rand.Read(b)
	token = hex.EncodeToString(b)
	for i := 0; i < 3; i++ {
		if out, stderr, code := boxctlRun("exec", id, "--", "sh", "-c", "echo "+token+" > /workspace/token; echo $((6*7)); exit 7"); code != 7 || out != "42\n" {
			t.Errorf("exec: exit %d, %q %q; want 7, \"42\\n\"", code, out, stderr)
		}
	}
	dst := t.TempDir()
	if _, err := boxctl(nil, "cp", id+":/workspace/token", dst); err != nil {
		t.Errorf("cp: %v", err)
	} else if b, err := os.ReadFile(filepath.Join(dst, "token")); err != nil || string(b) != token+"\n" {
		t.Errorf("file read: %q, %v; want %q", b, err, token)
	}
	return token
}

// TestInitChannelTakeover: root in a sandbox tries to take boxd's channel
// to the init over, by (a) listening where the init's socket is, to
// impersonate the init, and (b) leaving symlinks that would send boxd's
// dial to another host socket. Every attempt must be refused by the
// kernel, boxd must go on talking to the real init, and a trap listener on
// the host must see no connection.
func TestInitChannelTakeover(t *testing.T) {
	tr := newTrap(t)
	t.Run("redirect", func(t *testing.T) {
		id := newSandbox(t)
		host := filepath.Join(env.stateDir, "sandboxes", id)
		refusedAttempts(t, id, []struct{ name, script string }{
			{"symlink to the trap", "ln -sfn " + tr.path + " /.boxd/run/agent.sock"},
			{"symlink to the old socket path", "ln -sfn " + filepath.Join(host, "run", "agent.sock") + " /.boxd/run/agent.sock"},
			{"symlink to boxd's socket path", "ln -sfn " + filepath.Join(host, wire.SocketName) + " /.boxd/run/handoff.sock"},
			{"symlink under another name", "ln -s " + tr.path + " /.boxd/run/x"},
		})
		stillTheInit(t, id)
	})
	t.Run("impersonate", func(t *testing.T) {
		id := newSandbox(t)
		sockHelper(t, id)
		refusedAttempts(t, id, []struct{ name, script string }{
			{"listen at the socket's name", listenScript("/.boxd/run/agent.sock", "a")},
			{"listen at the hand-off socket's name", listenScript("/.boxd/run/handoff.sock", "b")},
			{"create a file", "touch /.boxd/run/agent.sock"},
			{"create a directory", "mkdir /.boxd/run/agent.sock"},
			{"hard link", "ln /bin/busybox /.boxd/run/x"},
			{"remove everything in it", "rm -rf /.boxd/run/* /.boxd/run/.[!.]* && touch /.boxd/run/x"},
			{"remove the directory", "rmdir /.boxd/run"},
			{"replace the directory", "mv /.boxd/run /.boxd/old"},
			{"chmod", "chmod 0777 /.boxd/run"},
			{"chown", "chown 0:0 /.boxd/run"},
			{"mount over it", "mount -t tmpfs none /.boxd/run"},
			{"unmount it", "umount -l /.boxd/run"},
		})
		if got := sh(t, id, "ls -A /.boxd/run | wc -l"); strings.TrimSpace(got) != "0" {
			t.Errorf("/.boxd/run holds %s entries after the attempts", strings.TrimSpace(got))
		}
		// Again with the mount moved out of the way: the sandbox may do as
		// it likes with its own tree; boxd never dials anything in it.
		sh(t, id, "mv /.boxd /.boxd.moved && mkdir -p /.boxd/run && "+listenScript("/.boxd/run/agent.sock", "c"))
		token := stillTheInit(t, id)
		if got := sh(t, id, "cat /tmp/hits.c"); got != "0" {
			t.Errorf("the sandbox's own listener was connected to %s times", got)
		}

		// A restarted init gets a fresh hand-off in the modified tree.
		pid := inspect(t, id).InitPid
		if err := syscall.Kill(int(pid), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		waitRestarted(t, id, pid)
		if got := sh(t, id, "cat /workspace/token; ls -A /.boxd/run | wc -l"); got != token+"\n0\n" {
			t.Errorf("after the restart: %q", got)
		}
		stillTheInit(t, id)
		// boxd's socket is where boxd put it, and a socket; nothing is left
		// where the sandbox could reach it.
		host := filepath.Join(env.stateDir, "sandboxes", id)
		if fi, err := os.Lstat(filepath.Join(host, wire.SocketName)); err != nil || fi.Mode().Type() != os.ModeSocket {
			t.Errorf("boxd's agent socket: %v %v", fi, err)
		}
		if ents, err := os.ReadDir(filepath.Join(host, "handoff")); err != nil || len(ents) != 0 {
			t.Errorf("hand-off directory: %v %v", ents, err)
		}
	})
	if n := tr.hits.Load(); n != 0 {
		t.Errorf("the trap on the host saw %d connections", n)
	}
}
