//go:build linux

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/sys/unix"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// bindSetup starts a boxd that allows binds beneath ROOT, a directory of
// the test's, and makes real host users to call it. ROOT holds mine (user
// a's, 0700, with a file hello) and theirs (user b's, 0700); outside is
// user a's too, next to ROOT.
type bindSetup struct {
	d                   *daemon
	ua, ub              hostUser
	apiA                clientsAs
	root, mine, outside string
	theirs              string
}

func newBindSetup(t *testing.T, ns string) *bindSetup {
	t.Helper()
	sockGroup, _, ua, ub, _ := hostUsers(t)
	top := t.TempDir()
	s := &bindSetup{ua: ua, ub: ub,
		root: filepath.Join(top, "root"), outside: filepath.Join(top, "outside")}
	s.mine, s.theirs = filepath.Join(s.root, "mine"), filepath.Join(s.root, "theirs")
	for _, d := range []string{filepath.Dir(top), top} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s.mkdir(t, s.root, 0, 0, 0o755)
	s.mkdir(t, s.mine, ua.uid, ua.gid, 0o700)
	s.mkdir(t, s.theirs, ub.uid, ub.gid, 0o700)
	s.mkdir(t, s.outside, ua.uid, ua.gid, 0o755)
	s.write(t, filepath.Join(s.mine, "hello"), "hello\n", ua)
	s.write(t, filepath.Join(s.outside, "secret"), "outside\n", ua)
	s.d = startBoxd(t, ns, true, "--socket-group", sockGroup, "--allow-bind", s.root)
	t.Cleanup(func() { detachBinds(s.d) }) // before the test's directories go
	if err := os.Chmod(filepath.Dir(s.d.dir), 0o711); err != nil {
		t.Fatal(err)
	}
	s.apiA = apiAs(ua, s.d.sock)
	return s
}

func (s *bindSetup) mkdir(t *testing.T, p string, uid, gid uint32, mode os.FileMode) {
	t.Helper()
	if err := os.Mkdir(p, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, int(uid), int(gid)); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

func (s *bindSetup) write(t *testing.T, p, data string, u hostUser) {
	t.Helper()
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(p, int(u.uid), int(u.gid)); err != nil {
		t.Fatal(err)
	}
}

// detachBinds unmounts the binds a killed boxd left on the host, so
// removing the test's directory never reaches into them.
func detachBinds(d *daemon) {
	mnts, _ := filepath.Glob(filepath.Join(d.dir, "state", "binds", "*", "*"))
	for _, m := range mnts {
		_ = syscall.Unmount(m, syscall.MNT_DETACH)
	}
}

// create makes a sandbox as c with binds.
func (s *bindSetup) create(t *testing.T, c clientsAs, binds ...string) (*boxdv1.Sandbox, error) {
	t.Helper()
	resp, err := c.sb.CreateSandbox(ctx(t), connect.NewRequest(&boxdv1.CreateSandboxRequest{Binds: binds}))
	if err != nil {
		return nil, err
	}
	id := resp.Msg.Sandbox.Id
	t.Cleanup(func() {
		_, _ = s.d.api.DeleteSandbox(context.Background(), connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: id, Force: true}))
	})
	return resp.Msg.Sandbox, nil
}

func (s *bindSetup) mustCreate(t *testing.T, binds ...string) *boxdv1.Sandbox {
	t.Helper()
	sb, err := s.create(t, s.apiA, binds...)
	if err != nil {
		t.Fatalf("create with binds %v: %v", binds, err)
	}
	return sb
}

// sh runs script in sandbox id as user a (user "": the sandbox's root)
// and returns its output and exit code.
func (s *bindSetup) sh(t *testing.T, id, user, script string) (string, int32) {
	t.Helper()
	resp, err := s.apiA.sb.Exec(ctx(t), connect.NewRequest(&boxdv1.ExecRequest{SandboxId: id, Args: []string{"sh", "-c", script}, User: user}))
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	return strings.TrimSpace(string(resp.Msg.Stdout) + string(resp.Msg.Stderr)), resp.Msg.Result.GetExitCode()
}

func ownerOnHost(t *testing.T, p string) (uint32, uint32) {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		t.Fatalf("stat %s: %v", p, err)
	}
	return st.Uid, st.Gid
}

// TestBinds: a bind beneath an allowed root, of a directory the caller
// can open, is mounted ID-mapped (what the sandbox's root writes is the
// caller's on the host, and it can hand nothing to another uid), shown in
// inspect, kept across an init restart (a lost host mount mounted again),
// left intact by delete; everything else is permission_denied naming the
// path; ro and noexec hold; forks and gVisor are refused.
func TestBinds(t *testing.T) {
	s := newBindSetup(t, "boxd-e2e-binds")
	t.Run("owned by the caller", func(t *testing.T) { bindOwnedByCaller(t, s) })
	t.Run("refused", func(t *testing.T) { bindRefusals(t, s) })
	t.Run("symlink to /etc", func(t *testing.T) { bindSymlinkToEtc(t, s) })
	t.Run("ro and noexec", func(t *testing.T) { bindReadOnlyNoexec(t, s) })
	t.Run("restart and delete", func(t *testing.T) { bindRestartDelete(t, s) })
}

func bindOwnedByCaller(t *testing.T, s *bindSetup) {
	sb := s.mustCreate(t, s.mine+":/workspace")
	if len(sb.Binds) != 1 || sb.Binds[0].Source != s.mine || sb.Binds[0].Path != "/workspace" || sb.Binds[0].ReadOnly {
		t.Errorf("binds in the create's answer: %v", sb.Binds)
	}
	got, err := s.apiA.sb.GetSandbox(ctx(t), connect.NewRequest(&boxdv1.GetSandboxRequest{Id: sb.Id}))
	if err != nil || len(got.Msg.Sandbox.Binds) != 1 || got.Msg.Sandbox.Binds[0].Source != s.mine {
		t.Errorf("binds in inspect: %v %v", got, err)
	}
	if out, code := s.sh(t, sb.Id, "", "cat /workspace/hello && echo new > /workspace/new && mkdir /workspace/d && stat -c %u:%g /workspace/hello /workspace/new"); code != 0 || out != "hello\n0:0\n0:0" {
		t.Errorf("root in the sandbox: %q (exit %d), want hello and both files root's", out, code)
	}
	for _, f := range []string{"new", "d"} {
		if uid, gid := ownerOnHost(t, filepath.Join(s.mine, f)); uid != s.ua.uid || gid != s.ua.gid {
			t.Errorf("%s on the host: %d:%d, want the caller's %d:%d", f, uid, gid, s.ua.uid, s.ua.gid)
		}
	}
	// No other id reaches the host: root cannot give a file away, and
	// the sandbox's other users cannot create files there at all.
	if out, code := s.sh(t, sb.Id, "", "chown 5:5 /workspace/new"); code == 0 {
		t.Errorf("chown to another uid worked: %q", out)
	}
	if out, code := s.sh(t, sb.Id, "", "chmod 777 /workspace"); code != 0 {
		t.Fatalf("chmod the bound directory as the sandbox's root (its owner): %q", out)
	}
	defer os.Chmod(s.mine, 0o700)
	if out, code := s.sh(t, sb.Id, "65534", "touch /workspace/by-65534"); code == 0 {
		uid, _ := ownerOnHost(t, filepath.Join(s.mine, "by-65534"))
		t.Errorf("uid 65534 in the sandbox created a file, owned on the host by %d: %q", uid, out)
	}
}

func bindRefusals(t *testing.T, s *bindSetup) {
	cases := []struct{ what, bind, path string }{
		{"outside every allowed root", s.outside + ":/w", s.outside},
		{"another user's 0700 directory", s.theirs + ":/w", s.theirs},
		{"a directory inside another user's", s.theirs + "/x:/w", s.theirs + "/x"},
		{".. in the path", s.mine + "/../theirs:/w", s.mine + "/../theirs"},
		{".. out of the root", s.root + "/../outside:/w", s.root + "/../outside"},
		{"the root's neighbour by prefix", s.root + "x:/w", s.root + "x"},
		{"a file", s.mine + "/hello:/w", s.mine + "/hello"},
	}
	if err := os.Mkdir(filepath.Join(s.theirs, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		_, err := s.create(t, s.apiA, c.bind)
		wantCodeAll(t, c.what, err, connect.CodePermissionDenied, "binds[0]", c.path)
	}
	// Host root's binds would write as host root: refused, even beneath
	// the root and of a directory root can open.
	_, err := s.create(t, apiAs(hostUser{name: "root", uid: 0, gid: 0}, s.d.sock), s.mine+":/w")
	wantCodeAll(t, "host root's bind", err, connect.CodePermissionDenied, "binds[0]", s.mine, "host root")
	// Malformed: invalid_argument naming the field.
	for _, b := range []string{s.mine, s.mine + ":w", s.mine + ":/proc/x", s.mine + ":/w:rx"} {
		_, err := s.create(t, s.apiA, b)
		wantCodeAll(t, "malformed "+b, err, connect.CodeInvalidArgument, "binds[0]")
	}
	_, err = s.create(t, s.apiA, s.mine+":/w", s.mine+":/w")
	wantCodeAll(t, "two binds on one path", err, connect.CodeInvalidArgument, "binds[1]")
	// gVisor does not apply ID-mapped mounts.
	_, err = s.apiA.sb.CreateSandbox(ctx(t), connect.NewRequest(&boxdv1.CreateSandboxRequest{Runtime: "gvisor", Binds: []string{s.mine + ":/w"}}))
	wantCodeAll(t, "gvisor with a bind", err, connect.CodeFailedPrecondition)
	// A fork does not carry binds: refused, nothing made.
	sb := s.mustCreate(t, s.mine+":/w")
	_, err = s.apiA.sb.ForkSandbox(ctx(t), connect.NewRequest(&boxdv1.ForkSandboxRequest{SandboxId: sb.Id}))
	wantCodeAll(t, "fork of a sandbox with a bind", err, connect.CodeFailedPrecondition, "/w", "bind")
}

// bindSymlinkToEtc: a symlink to /etc planted in the bound tree is
// refused as a bind's path, and inside the sandbox it is the sandbox's
// own /etc: the host's is neither read nor written, not even after the
// bound directory's path is swapped for that symlink on the host.
func bindSymlinkToEtc(t *testing.T, s *bindSetup) {
	dir := filepath.Join(s.root, "planted")
	s.mkdir(t, dir, s.ua.uid, s.ua.gid, 0o755)
	link := filepath.Join(dir, "etc")
	if err := os.Symlink("/etc", link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../../../../../../etc", filepath.Join(dir, "up")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{link, filepath.Join(dir, "up")} {
		_, err := s.create(t, s.apiA, p+":/w")
		wantCodeAll(t, "bind of a symlink out", err, connect.CodePermissionDenied, "binds[0]", p, "leads out")
	}
	sb := s.mustCreate(t, dir+":/w")
	probe := "boxd-bind-probe-" + strconv.Itoa(os.Getpid())
	t.Cleanup(func() { os.Remove("/etc/" + probe) })
	out, _ := s.sh(t, sb.Id, "", "cat /w/etc/passwd; cat /w/up/passwd; echo x > /w/etc/"+probe+"; echo x > /w/up/"+probe+"; true")
	if strings.Contains(out, s.ua.name) {
		t.Errorf("the sandbox read the host's /etc/passwd through the planted symlink: %q", out)
	}
	if _, err := os.Lstat("/etc/" + probe); err == nil {
		t.Errorf("the sandbox wrote the host's /etc through the planted symlink")
	}
	// The host side swaps the bound path for a symlink to /etc: the
	// sandbox keeps the directory it was given.
	if err := os.Rename(dir, dir+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", dir); err != nil {
		t.Fatal(err)
	}
	if out, _ := s.sh(t, sb.Id, "", "ls /w; cat /w/passwd 2>&1; true"); strings.Contains(out, s.ua.name) || !strings.Contains(out, "up") {
		t.Errorf("after the host swapped the path: %q, want the planted directory still", out)
	}
}

func bindReadOnlyNoexec(t *testing.T, s *bindSetup) {
	s.write(t, filepath.Join(s.mine, "run.sh"), "#!/bin/sh\necho ran\n", s.ua)
	if err := os.Chmod(filepath.Join(s.mine, "run.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	ro := s.mustCreate(t, s.mine+":/w:ro", s.mine+":/x:noexec")
	if !ro.Binds[0].ReadOnly || ro.Binds[0].Noexec || !ro.Binds[1].Noexec || ro.Binds[1].ReadOnly {
		t.Errorf("binds: %v", ro.Binds)
	}
	if out, code := s.sh(t, ro.Id, "", "touch /w/ro-write"); code == 0 || !strings.Contains(out, "Read-only") {
		t.Errorf("write to a read-only bind: %q (exit %d)", out, code)
	}
	if _, err := os.Lstat(filepath.Join(s.mine, "ro-write")); err == nil {
		t.Error("a read-only bind was written")
	}
	if out, code := s.sh(t, ro.Id, "", "/w/run.sh"); code != 0 || out != "ran" {
		t.Errorf("exec from a bind without noexec: %q (exit %d)", out, code)
	}
	if out, code := s.sh(t, ro.Id, "", "/x/run.sh"); code == 0 {
		t.Errorf("exec from a noexec bind: %q", out)
	}
}

// bindRestartDelete: an init restart keeps the bind, even when the host
// lost boxd's mount of it (as after a reboot: mounted again, checked
// again); delete unmounts it and leaves the caller's files.
func bindRestartDelete(t *testing.T, s *bindSetup) {
	sb := s.mustCreate(t, s.mine+":/w")
	staged := filepath.Join(s.d.dir, "state", "binds", sb.Id, "0")
	if err := unix.Unmount(staged, unix.MNT_DETACH); err != nil {
		t.Fatalf("detach boxd's host mount of the bind: %v", err)
	}
	if err := syscall.Kill(int(sb.InitPid), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		got, err := s.apiA.sb.GetSandbox(ctx(t), connect.NewRequest(&boxdv1.GetSandboxRequest{Id: sb.Id}))
		if err == nil && got.Msg.Sandbox.InitRestarts > 0 && got.Msg.Sandbox.State == "running" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no restart: %v %v", got, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if out, code := s.sh(t, sb.Id, "", "cat /w/hello"); code != 0 || out != "hello" {
		t.Errorf("after the restart: %q (exit %d)", out, code)
	}
	if _, err := s.apiA.sb.DeleteSandbox(ctx(t), connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: sb.Id})); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Dir(staged)); !os.IsNotExist(err) {
		t.Errorf("boxd's bind directory after delete: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(s.mine, "hello")); err != nil || string(b) != "hello\n" {
		t.Errorf("the caller's file after delete: %q %v", b, err)
	}
}

// TestBindRenameRace: while creates bind ROOT/race, the host swaps that
// path between a directory and a symlink to /etc (renameat2
// RENAME_EXCHANGE, as fast as it can). Every create either mounts the
// directory or is refused; none ever mounts /etc.
func TestBindRenameRace(t *testing.T) {
	s := newBindSetup(t, "boxd-e2e-bindrace")
	race, alt := filepath.Join(s.root, "race"), filepath.Join(s.root, "race.alt")
	s.mkdir(t, race, s.ua.uid, s.ua.gid, 0o755)
	s.write(t, filepath.Join(race, "inside"), "inside\n", s.ua)
	if err := os.Symlink("/etc", alt); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var swaps atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
			if unix.Renameat2(unix.AT_FDCWD, race, unix.AT_FDCWD, alt, unix.RENAME_EXCHANGE) == nil {
				swaps.Add(1)
			}
		}
	}()
	mounted, refused := 0, 0
	for i := 0; i < 12; i++ {
		sb, err := s.create(t, s.apiA, race+":/w")
		if err != nil {
			wantCodeAll(t, "create during the race", err, connect.CodePermissionDenied, race)
			refused++
			continue
		}
		mounted++
		out, _ := s.sh(t, sb.Id, "", "ls /w; cat /w/passwd 2>/dev/null; true")
		if out != "inside" {
			t.Errorf("create %d mounted something else than the directory: %q", i, out)
		}
		_, _ = s.d.api.DeleteSandbox(ctx(t), connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: sb.Id, Force: true}))
	}
	stop.Store(true)
	<-done
	t.Logf("%d creates mounted the directory, %d were refused; %d swaps", mounted, refused, swaps.Load())
	if mounted == 0 {
		t.Error("no create mounted the directory")
	}
}
