//go:build linux

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/boxd-dev/boxd/internal/audit"
	"github.com/boxd-dev/boxd/internal/testenv"
	"github.com/boxd-dev/boxd/rpc/apiwire"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
)

// hostUser is a real account the test makes with useradd and removes.
type hostUser struct {
	name     string
	uid, gid uint32
	groups   []uint32
}

// hostUsers makes a socket group, an admin group and three users in the
// socket group: a and b (plain) and admin (also in the admin group). Names
// are test-unique; everything is removed when the test ends.
func hostUsers(t *testing.T) (sockGroup, adminGroup string, a, b, admin hostUser) {
	t.Helper()
	buf := make([]byte, 3)
	_, _ = rand.Read(buf)
	tag := hex.EncodeToString(buf)
	sockGroup, adminGroup = "bxs"+tag, "bxadm"+tag
	run := func(name string, args ...string) {
		t.Helper()
		if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v %s", name, args, err, out)
		}
	}
	for _, g := range []string{sockGroup, adminGroup} {
		run("groupadd", g)
		g := g
		t.Cleanup(func() { _ = exec.Command("groupdel", g).Run() })
	}
	mk := func(role string, extra ...string) hostUser {
		name := "bx" + role + tag
		args := append([]string{"-M", "-N", "-g", sockGroup, "-s", "/usr/sbin/nologin", "-d", "/nonexistent"}, extra...)
		run("useradd", append(args, name)...)
		t.Cleanup(func() { _ = exec.Command("userdel", name).Run() })
		u, err := user.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		hu := hostUser{name: name, uid: uint32(uid), gid: uint32(gid)}
		gids, _ := u.GroupIds()
		for _, g := range gids {
			n, _ := strconv.ParseUint(g, 10, 32)
			hu.groups = append(hu.groups, uint32(n))
		}
		return hu
	}
	return sockGroup, adminGroup, mk("a"), mk("b"), mk("c", "-G", adminGroup)
}

// clientsAs are API clients whose connections are u's.
type clientsAs struct {
	sb       boxdv1connect.SandboxServiceClient
	files    boxdv1connect.FileServiceClient
	procs    boxdv1connect.ProcessServiceClient
	events   boxdv1connect.EventServiceClient
	registry boxdv1connect.RegistryServiceClient
	volumes  boxdv1connect.VolumeServiceClient
	code     boxdv1connect.CodeServiceClient
}

func apiAs(u hostUser, sock string) clientsAs {
	tr := apiwire.Transport(sock)
	tr.DialContext = testenv.DialAs(u.uid, u.gid, u.groups, sock)
	hc := &http.Client{Transport: tr}
	const base = "http://boxd"
	return clientsAs{
		sb:       boxdv1connect.NewSandboxServiceClient(hc, base),
		files:    boxdv1connect.NewFileServiceClient(hc, base),
		procs:    boxdv1connect.NewProcessServiceClient(hc, base),
		volumes:  boxdv1connect.NewVolumeServiceClient(hc, base),
		events:   boxdv1connect.NewEventServiceClient(hc, base),
		registry: boxdv1connect.NewRegistryServiceClient(hc, base),
		code:     boxdv1connect.NewCodeServiceClient(hc, base),
	}
}

// boxctlAs runs boxctl as u (a copy u can execute) and returns stdout,
// stderr, exit code and the process's pid.
func boxctlAs(t *testing.T, bin string, u hostUser, sock string, args ...string) (string, string, int, int) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"--socket", sock}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.uid, Gid: u.gid, Groups: u.groups}}
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/"}
	cmd.Dir = "/"
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("boxctl as %s: %v", u.name, err)
	}
	return stdout.String(), stderr.String(), code, cmd.Process.Pid
}

// rpcCase performs one sandbox-scoped RPC against target.
type rpcCase struct {
	name string
	call func(ctx context.Context, c clientsAs, target string) error
}

// drain reads a server stream to its end and returns its error.
func drainStream[T any](s *connect.ServerStreamForClient[T], err error) error {
	if err != nil {
		return err
	}
	for s.Receive() {
	}
	return s.Err()
}

// sandboxRPCs is every RPC that names a sandbox, with a valid request.
var sandboxRPCs = []rpcCase{
	{"GetSandbox", func(ctx context.Context, c clientsAs, id string) error {
		_, err := c.sb.GetSandbox(ctx, connect.NewRequest(&boxdv1.GetSandboxRequest{Id: id}))
		return err
	}},
	{"UpdateNetwork", func(ctx context.Context, c clientsAs, id string) error {
		_, err := c.sb.UpdateNetwork(ctx, connect.NewRequest(&boxdv1.UpdateNetworkRequest{SandboxId: id, Allow: []string{"192.0.2.1:443"}}))
		return err
	}},
	{"Exec", func(ctx context.Context, c clientsAs, id string) error {
		_, err := c.sb.Exec(ctx, connect.NewRequest(&boxdv1.ExecRequest{SandboxId: id, Args: []string{"true"}}))
		return err
	}},
	{"ExecStream", func(ctx context.Context, c clientsAs, id string) error {
		return drainStream(c.sb.ExecStream(ctx, connect.NewRequest(&boxdv1.ExecRequest{SandboxId: id, Args: []string{"true"}})))
	}},
	{"CopyIn", func(ctx context.Context, c clientsAs, id string) error {
		s := c.sb.CopyIn(ctx)
		_ = s.Send(&boxdv1.CopyInRequest{SandboxId: id, Path: "/tmp"})
		_, err := s.CloseAndReceive()
		return err
	}},
	{"CopyOut", func(ctx context.Context, c clientsAs, id string) error {
		return drainStream(c.sb.CopyOut(ctx, connect.NewRequest(&boxdv1.CopyOutRequest{SandboxId: id, Path: "/etc/hostname"})))
	}},
	{"StatPath", func(ctx context.Context, c clientsAs, id string) error {
		_, err := c.sb.StatPath(ctx, connect.NewRequest(&boxdv1.StatPathRequest{SandboxId: id, Path: "/etc"}))
		return err
	}},
	{"PublishPort", func(ctx context.Context, c clientsAs, id string) error {
		_, err := c.sb.PublishPort(ctx, connect.NewRequest(&boxdv1.PublishPortRequest{SandboxId: id, Port: &boxdv1.PublishedPort{Port: 8080}}))
		return err
	}},
	{"UnpublishPort", func(ctx context.Context, c clientsAs, id string) error {
		_, err := c.sb.UnpublishPort(ctx, connect.NewRequest(&boxdv1.UnpublishPortRequest{SandboxId: id, Port: 8080}))
		return err
	}},
	{"WriteFile", func(ctx context.Context, c clientsAs, id string) error {
		s := c.files.WriteFile(ctx)
		_ = s.Send(&boxdv1.WriteFileRequest{SandboxId: id, Path: "/tmp/owned", Data: []byte("x")})
		_, err := s.CloseAndReceive()
		return err
	}},
	{"ReadFile", func(ctx context.Context, c clientsAs, id string) error {
		return drainStream(c.files.ReadFile(ctx, connect.NewRequest(&boxdv1.ReadFileRequest{SandboxId: id, Path: "/etc/hostname"})))
	}},
	{"StatFile", func(ctx context.Context, c clientsAs, id string) error {
		_, err := c.files.StatFile(ctx, connect.NewRequest(&boxdv1.StatFileRequest{SandboxId: id, Path: "/etc"}))
		return err
	}},
	{"ListDir", func(ctx context.Context, c clientsAs, id string) error {
		return drainStream(c.files.ListDir(ctx, connect.NewRequest(&boxdv1.ListDirRequest{SandboxId: id, Path: "/etc"})))
	}},
	{"MakeDir", func(ctx context.Context, c clientsAs, id string) error {
		_, err := c.files.MakeDir(ctx, connect.NewRequest(&boxdv1.MakeDirRequest{SandboxId: id, Path: "/tmp/owned-dir", Parents: true}))
		return err
	}},
	{"RemovePath", func(ctx context.Context, c clientsAs, id string) error {
		_, err := c.files.RemovePath(ctx, connect.NewRequest(&boxdv1.RemovePathRequest{SandboxId: id, Path: "/tmp/owned-dir", Recursive: true}))
		return err
	}},
	{"RenamePath", func(ctx context.Context, c clientsAs, id string) error {
		_, err := c.files.RenamePath(ctx, connect.NewRequest(&boxdv1.RenamePathRequest{SandboxId: id, Src: "/tmp/owned", Dst: "/tmp/owned2"}))
		return err
	}},
	{"ChmodPath", func(ctx context.Context, c clientsAs, id string) error {
		_, err := c.files.ChmodPath(ctx, connect.NewRequest(&boxdv1.ChmodPathRequest{SandboxId: id, Path: "/tmp", Mode: 0o1777}))
		return err
	}},
	{"UploadFiles", func(ctx context.Context, c clientsAs, id string) error {
		s := c.files.UploadFiles(ctx)
		_ = s.Send(&boxdv1.UploadFilesRequest{SandboxId: id, File: &boxdv1.UploadFile{Path: "/tmp/up"}, Data: []byte("x")})
		_, err := s.CloseAndReceive()
		return err
	}},
	{"DownloadFiles", func(ctx context.Context, c clientsAs, id string) error {
		return drainStream(c.files.DownloadFiles(ctx, connect.NewRequest(&boxdv1.DownloadFilesRequest{SandboxId: id, Paths: []string{"/etc/hostname"}})))
	}},
	{"WatchPath", func(ctx context.Context, c clientsAs, id string) error {
		wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		s, err := c.files.WatchPath(wctx, connect.NewRequest(&boxdv1.WatchPathRequest{SandboxId: id, Path: "/tmp"}))
		if err != nil {
			return err
		}
		// A watch that is let in sends its ready message, then waits.
		if s.Receive() {
			return nil
		}
		return s.Err()
	}},
	{"Process.Exec", func(ctx context.Context, c clientsAs, id string) error {
		s := c.procs.Exec(ctx)
		_ = s.Send(&boxdv1.ProcessInput{Event: &boxdv1.ProcessInput_Start{Start: &boxdv1.ProcessSpec{SandboxId: id, Args: []string{"true"}}}})
		_ = s.CloseRequest()
		for {
			if _, err := s.Receive(); err != nil {
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			}
		}
	}},
	{"Process.Start", func(ctx context.Context, c clientsAs, id string) error {
		_, err := c.procs.Start(ctx, connect.NewRequest(&boxdv1.StartProcessRequest{Spec: &boxdv1.ProcessSpec{SandboxId: id, Args: []string{"true"}}}))
		return err
	}},
	{"Process.List", func(ctx context.Context, c clientsAs, id string) error {
		_, err := c.procs.List(ctx, connect.NewRequest(&boxdv1.ListProcessesRequest{SandboxId: id}))
		return err
	}},
	{"Process.Wait", func(ctx context.Context, c clientsAs, id string) error {
		_, err := c.procs.Wait(ctx, connect.NewRequest(&boxdv1.WaitProcessRequest{SandboxId: id, ProcessId: "p1"}))
		return err
	}},
	{"Process.Signal", func(ctx context.Context, c clientsAs, id string) error {
		_, err := c.procs.Signal(ctx, connect.NewRequest(&boxdv1.SignalProcessRequest{SandboxId: id, ProcessId: "p1", Signal: "TERM"}))
		return err
	}},
	{"Process.Attach", func(ctx context.Context, c clientsAs, id string) error {
		s := c.procs.Attach(ctx)
		_ = s.Send(&boxdv1.ProcessInput{Event: &boxdv1.ProcessInput_Attach{Attach: &boxdv1.AttachRequest{SandboxId: id, ProcessId: "p1", NoFollow: true}}})
		_ = s.CloseRequest()
		for {
			if _, err := s.Receive(); err != nil {
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			}
		}
	}},
	{"CreateSession", func(ctx context.Context, c clientsAs, id string) error {
		_, err := c.procs.CreateSession(ctx, connect.NewRequest(&boxdv1.CreateSessionRequest{SandboxId: id, Name: "s1"}))
		return err
	}},
	{"ListSessions", func(ctx context.Context, c clientsAs, id string) error {
		_, err := c.procs.ListSessions(ctx, connect.NewRequest(&boxdv1.ListSessionsRequest{SandboxId: id}))
		return err
	}},
	{"SessionExec", func(ctx context.Context, c clientsAs, id string) error {
		return drainStream(c.procs.SessionExec(ctx, connect.NewRequest(&boxdv1.SessionExecRequest{SandboxId: id, Name: "s1", Command: "true"})))
	}},
	{"DeleteSession", func(ctx context.Context, c clientsAs, id string) error {
		_, err := c.procs.DeleteSession(ctx, connect.NewRequest(&boxdv1.DeleteSessionRequest{SandboxId: id, Name: "s1"}))
		return err
	}},
	{"Stats", func(ctx context.Context, c clientsAs, id string) error {
		return drainStream(c.sb.Stats(ctx, connect.NewRequest(&boxdv1.StatsRequest{Ids: []string{id}, Interval: "100ms"})))
	}},
	{"ForkSandbox", func(ctx context.Context, c clientsAs, id string) error {
		r, err := c.sb.ForkSandbox(ctx, connect.NewRequest(&boxdv1.ForkSandboxRequest{SandboxId: id, Count: 1, Limits: &boxdv1.Limits{Memory: "64m"}}))
		if err == nil {
			for _, sb := range r.Msg.Sandboxes {
				_, _ = c.sb.DeleteSandbox(ctx, connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: sb.Id}))
			}
		}
		return err
	}},
	{"NetworkLog", func(ctx context.Context, c clientsAs, id string) error {
		_, err := c.sb.NetworkLog(ctx, connect.NewRequest(&boxdv1.NetworkLogRequest{SandboxId: id}))
		return err
	}},
	{"DiffSandbox", func(ctx context.Context, c clientsAs, id string) error {
		return drainStream(c.sb.DiffSandbox(ctx, connect.NewRequest(&boxdv1.DiffSandboxRequest{SandboxId: id, Patch: true})))
	}},
	{"CheckpointSandbox", func(ctx context.Context, c clientsAs, id string) error {
		_, err := c.sb.CheckpointSandbox(ctx, connect.NewRequest(&boxdv1.CheckpointSandboxRequest{Id: id}))
		return err
	}},
	{"RestoreSandbox", func(ctx context.Context, c clientsAs, id string) error {
		_, err := c.sb.RestoreSandbox(ctx, connect.NewRequest(&boxdv1.RestoreSandboxRequest{Id: id}))
		return err
	}},
	{"ForkSandbox with_processes", func(ctx context.Context, c clientsAs, id string) error {
		_, err := c.sb.ForkSandbox(ctx, connect.NewRequest(&boxdv1.ForkSandboxRequest{SandboxId: id, Count: 1, WithProcesses: true}))
		return err
	}},
	// Last: it would end the sandbox for the owner's pass.
	{"DeleteSandbox", func(ctx context.Context, c clientsAs, id string) error {
		_, err := c.sb.DeleteSandbox(ctx, connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: id}))
		return err
	}},
}

// TestOwnership: two real host users share one boxd socket. Each sees and
// reaches only its own sandboxes (every sandbox-scoped RPC by user b on
// user a's sandbox is not_found, exactly as for an id that does not
// exist), names are per user, an --admin-group member sees and manages
// all, quotas hold per user, image changes need an admin, every mutating
// call is in the audit log with the caller's uid and pid, and all of it
// survives a boxd SIGKILL. The same attack between MCP sessions of one
// user on a shared `boxctl mcp --http-socket` is TestOwnershipMCPSessions
// (owner_mcp_test.go).
func TestOwnership(t *testing.T) {
	sockGroup, adminGroup, ua, ub, uc := hostUsers(t)
	d := startBoxd(t, "boxd-e2e-owner", true, "--socket-group", sockGroup, "--admin-group", adminGroup,
		"--max-sandboxes-per-user", "2", "--max-memory-per-user", "1g", "--default-memory", "256m")
	// The test users reach the socket and a copy of boxctl they can run
	// through the test's directories.
	if err := os.Chmod(filepath.Dir(d.dir), 0o711); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(d.dir, "boxctl")
	for _, name := range []string{"boxctl", "boxctl-full"} {
		if b, err := os.ReadFile(filepath.Join(filepath.Dir(env.boxctl), name)); err != nil || os.WriteFile(filepath.Join(d.dir, name), b, 0o755) != nil {
			t.Fatalf("copy %s: %v", name, err)
		}
	}
	as := func(u hostUser, args ...string) (string, string, int, int) {
		return boxctlAs(t, bin, u, d.sock, args...)
	}
	create := func(u hostUser, args ...string) string {
		t.Helper()
		out, stderr, code, _ := as(u, append([]string{"create"}, args...)...)
		if code != 0 {
			t.Fatalf("create %v as %s: exit %d: %s", args, u.name, code, stderr)
		}
		return strings.TrimSpace(out)
	}
	sbA := create(ua, "--name", "ci")
	sbB := create(ub, "--name", "ci") // names are per user
	c := ctx(t)
	apiA, apiB, apiC := apiAs(ua, d.sock), apiAs(ub, d.sock), apiAs(uc, d.sock)

	t.Run("list", func(t *testing.T) {
		out, _, code, _ := as(ub, "ls")
		if code != 0 || !strings.Contains(out, sbB) || strings.Contains(out, sbA) || !strings.Contains(out, ub.name) {
			t.Errorf("b's ls (exit %d) must show b's sandbox only, with b as owner:\n%s", code, out)
		}
		_, stderr, code, _ := as(ub, "ls", "--all")
		if code == 0 || !strings.Contains(stderr, "permission_denied") {
			t.Errorf("b's ls --all: exit %d, %s; want permission_denied", code, stderr)
		}
		_, stderr, code, _ = as(ub, "ls", "--owner", ua.name)
		if code == 0 || !strings.Contains(stderr, "permission_denied") {
			t.Errorf("b's ls --owner a: exit %d, %s; want permission_denied", code, stderr)
		}
		_, stderr, code, _ = as(uc, "ls", "--owner", "nosuchuser-"+ua.name)
		if code == 0 || !strings.Contains(stderr, "invalid_argument") || !strings.Contains(stderr, "owner") {
			t.Errorf("ls --owner unknown: exit %d, %s; want invalid_argument naming owner", code, stderr)
		}
		out, _, code, _ = as(uc, "ls", "--all")
		if code != 0 || !strings.Contains(out, sbA) || !strings.Contains(out, sbB) || !strings.Contains(out, "OWNER") || !strings.Contains(out, ua.name) {
			t.Errorf("admin's ls --all (exit %d) must show both with owners:\n%s", code, out)
		}
		out, _, _, _ = as(uc, "ls", "--owner", ua.name)
		if !strings.Contains(out, sbA) || strings.Contains(out, sbB) {
			t.Errorf("admin's ls --owner a:\n%s", out)
		}
		resp, err := apiB.sb.ListSandboxes(c, connect.NewRequest(&boxdv1.ListSandboxesRequest{}))
		if err != nil || len(resp.Msg.Sandboxes) != 1 || resp.Msg.Sandboxes[0].OwnerUid != ub.uid {
			t.Errorf("b's API list: %v %v", resp, err)
		}
	})

	t.Run("every RPC", func(t *testing.T) {
		const missing = "0123456789ab"
		for _, rc := range sandboxRPCs {
			// The reference: the same call on an id that does not exist.
			want := rc.call(c, apiB, missing)
			if connect.CodeOf(want) != connect.CodeNotFound {
				t.Errorf("%s on a missing sandbox: %v, want not_found", rc.name, want)
				continue
			}
			err := rc.call(c, apiB, sbA)
			wantMsg := strings.ReplaceAll(want.Error(), missing, sbA)
			if connect.CodeOf(err) != connect.CodeNotFound || err.Error() != wantMsg {
				t.Errorf("%s by b on a's sandbox: %v; want exactly %q", rc.name, err, wantMsg)
			}
		}
		// By name: b's "ci" is b's own; a's name that b does not have is
		// not found.
		create(ua, "--name", "only-a")
		if _, err := apiB.sb.Exec(c, connect.NewRequest(&boxdv1.ExecRequest{SandboxId: "only-a", Args: []string{"true"}})); connect.CodeOf(err) != connect.CodeNotFound {
			t.Errorf("b's exec in a's sandbox by name: %v", err)
		}
		resp, err := apiB.sb.GetSandbox(c, connect.NewRequest(&boxdv1.GetSandboxRequest{Id: "ci"}))
		if err != nil || resp.Msg.Sandbox.Id != sbB {
			t.Errorf("b's get of \"ci\" must be b's own %s: %v %v", sbB, resp, err)
		}
		// The table reaches the sandbox for its owner and for an admin:
		// whatever the result, it is not the sandbox that is not found.
		for _, who := range []struct {
			name string
			api  clientsAs
		}{{"a", apiA}, {"admin", apiC}} {
			for _, rc := range sandboxRPCs {
				if rc.name == "DeleteSandbox" {
					continue
				}
				if err := rc.call(c, who.api, sbA); err != nil && strings.Contains(err.Error(), fmt.Sprintf("sandbox %q not found", sbA)) {
					t.Errorf("%s by %s on a's sandbox: %v", rc.name, who.name, err)
				}
			}
		}
		if sb, err := apiA.sb.GetSandbox(c, connect.NewRequest(&boxdv1.GetSandboxRequest{Id: sbA})); err != nil {
			t.Fatalf("b's delete took a's sandbox: %v", err)
		} else if sb.Msg.Sandbox.OwnerUid != ua.uid || sb.Msg.Sandbox.Owner != ua.name {
			t.Errorf("a's sandbox shows owner %d %q", sb.Msg.Sandbox.OwnerUid, sb.Msg.Sandbox.Owner)
		}
	})

	t.Run("names", func(t *testing.T) {
		// An admin's name lookup prefers its own sandbox, and refuses to
		// guess among other users' ones.
		sbC := create(uc, "--name", "ci")
		defer as(uc, "rm", sbC)
		if r, err := apiC.sb.GetSandbox(c, connect.NewRequest(&boxdv1.GetSandboxRequest{Id: "ci"})); err != nil || r.Msg.Sandbox.Id != sbC {
			t.Errorf("admin's get of \"ci\" must be its own %s: %v %v", sbC, r, err)
		}
		_, stderr, code := d.boxctl("inspect", "ci")
		if code == 0 || !strings.Contains(stderr, "invalid_argument") || !strings.Contains(stderr, "several users") {
			t.Errorf("root's inspect of a name three users have: exit %d %s", code, stderr)
		}
	})

	t.Run("fork", func(t *testing.T) {
		r, err := apiB.sb.ForkSandbox(c, connect.NewRequest(&boxdv1.ForkSandboxRequest{SandboxId: sbB, Count: 1, Limits: &boxdv1.Limits{Memory: "64m"}}))
		if err != nil {
			t.Fatalf("b forks its own: %v", err)
		}
		f := r.Msg.Sandboxes[0]
		if f.OwnerUid != ub.uid {
			t.Errorf("b's fork is owned by %d, want b (%d)", f.OwnerUid, ub.uid)
		}
		if _, err := apiA.sb.GetSandbox(c, connect.NewRequest(&boxdv1.GetSandboxRequest{Id: f.Id})); connect.CodeOf(err) != connect.CodeNotFound {
			t.Errorf("a sees b's fork: %v", err)
		}
		// b now has two: a further fork is over its count quota.
		_, err = apiB.sb.ForkSandbox(c, connect.NewRequest(&boxdv1.ForkSandboxRequest{SandboxId: sbB, Count: 1, Limits: &boxdv1.Limits{Memory: "64m"}}))
		if connect.CodeOf(err) != connect.CodeResourceExhausted || !strings.Contains(err.Error(), "max-sandboxes-per-user") {
			t.Errorf("b's third sandbox by fork: %v", err)
		}
		if _, err := apiB.sb.DeleteSandbox(c, connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: f.Id})); err != nil {
			t.Errorf("b deletes its fork: %v", err)
		}
	})

	t.Run("boxctl", func(t *testing.T) {
		_, stderr, code, _ := as(ub, "exec", sbA, "--", "true")
		if code == 0 || !strings.Contains(stderr, "not_found") {
			t.Errorf("b's boxctl exec in a's: exit %d %s", code, stderr)
		}
		_, stderr, code, _ = as(ub, "rm", sbA)
		if code == 0 || !strings.Contains(stderr, "not_found") {
			t.Errorf("b's boxctl rm of a's: exit %d %s", code, stderr)
		}
		if _, _, code, _ := as(ua, "inspect", sbA); code != 0 {
			t.Errorf("a's sandbox is gone after b's rm")
		}
		if out, stderr, code, _ := as(uc, "exec", sbA, "--", "echo", "admin-was-here"); code != 0 || !strings.Contains(out, "admin-was-here") {
			t.Errorf("admin's exec in a's: exit %d %s %s", code, out, stderr)
		}
	})

	t.Run("images", func(t *testing.T) {
		if out, stderr, code, _ := as(ub, "image", "ls"); code != 0 || !strings.Contains(out, "busybox") {
			t.Errorf("b's image ls: exit %d %s %s", code, out, stderr)
		}
		_, stderr, code, _ := as(ub, "image", "rm", testImage)
		if code == 0 || !strings.Contains(stderr, "permission_denied") || !strings.Contains(stderr, "admin-group") {
			t.Errorf("b's image rm: exit %d %s; want permission_denied", code, stderr)
		}
		if _, err := apiB.sb.RemoveImage(c, connect.NewRequest(&boxdv1.RemoveImageRequest{Name: testImage})); connect.CodeOf(err) != connect.CodePermissionDenied {
			t.Errorf("b's RemoveImage: %v", err)
		}
		// Committing writes an image too: b may not, even from its own.
		if _, err := apiB.sb.CommitSandbox(c, connect.NewRequest(&boxdv1.CommitSandboxRequest{SandboxId: sbB, Ref: testImage, Force: true})); connect.CodeOf(err) != connect.CodePermissionDenied {
			t.Errorf("b's CommitSandbox over the shared image: %v", err)
		}
		// So does a build.
		bs := apiB.sb.BuildImage(c)
		_ = bs.Send(&boxdv1.BuildImageRequest{Ref: testImage, Force: true, Dockerfile: []byte("FROM " + testImage + "\nRUN true\n")})
		if _, err := bs.CloseAndReceive(); connect.CodeOf(err) != connect.CodePermissionDenied {
			t.Errorf("b's BuildImage over the shared image: %v", err)
		}
	})

	t.Run("quotas", func(t *testing.T) {
		// a has two (ci, only-a) at 256m each: the third is over the count.
		_, stderr, code, _ := as(ua, "create", "--memory", "64m")
		if code == 0 || !strings.Contains(stderr, "resource_exhausted") || !strings.Contains(stderr, "max-sandboxes-per-user") {
			t.Errorf("a's third sandbox: exit %d %s; want resource_exhausted naming max-sandboxes-per-user", code, stderr)
		}
		// b has one at 256m: 800m more is over 1g.
		_, stderr, code, _ = as(ub, "create", "--memory", "800m")
		if code == 0 || !strings.Contains(stderr, "resource_exhausted") || !strings.Contains(stderr, "max-memory-per-user") {
			t.Errorf("b's 800m sandbox: exit %d %s; want resource_exhausted naming max-memory-per-user", code, stderr)
		}
		// Quotas are per user: b can still make one within its share,
		// and root is not limited.
		idB2 := create(ub, "--memory", "512m")
		// A sandbox deleted in the background is no client's at once, but
		// its processes hold their memory through the grace period: it
		// counts against b's quota until its teardown ends.
		if _, stderr, code, _ := as(ub, "exec", "-d", idB2, "--", "sh", "-c", "trap '' TERM; sleep 60"); code != 0 {
			t.Fatalf("b's process ignoring SIGTERM: exit %d %s", code, stderr)
		}
		if _, err := apiB.sb.DeleteSandbox(c, connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: idB2, Timeout: "4s", Background: true})); err != nil {
			t.Fatalf("b's background delete: %v", err)
		}
		_, stderr, code, _ = as(ub, "create", "--memory", "512m")
		if code == 0 || !strings.Contains(stderr, "resource_exhausted") {
			t.Errorf("b's 512m sandbox while another 512m of b's is being deleted: exit %d %s; want resource_exhausted (b would have 3 sandboxes and 1.25g)", code, stderr)
		}
		// Once the teardown is done, the share is free again.
		var idB3 string
		for deadline := time.Now().Add(30 * time.Second); idB3 == "" && time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
			if out, _, code, _ := as(ub, "create", "--memory", "512m"); code == 0 {
				idB3 = strings.TrimSpace(out)
			}
		}
		if idB3 == "" {
			t.Fatal("b's quota share was not freed after its background delete ended")
		}
		if _, _, code, _ := as(ub, "rm", "-f", idB3); code != 0 {
			t.Errorf("b rm its own: exit %d", code)
		}
		for i := 0; i < 3; i++ {
			if _, stderr, code := d.boxctl("create", "--memory", "512m"); code != 0 {
				t.Fatalf("root's create %d: %s", i, stderr)
			}
		}
	})

	t.Run("audit", func(t *testing.T) {
		_, _, code, pid := as(ua, "exec", sbA, "--", "true")
		if code != 0 {
			t.Fatal("a's exec failed")
		}
		_, _, _, pidB := as(ub, "exec", sbA, "--", "true")
		p := filepath.Join(d.dir, "state", audit.FileName)
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 || st.Sys().(*syscall.Stat_t).Uid != 0 {
			t.Errorf("audit log mode %v uid %d, want 0600 root", st.Mode().Perm(), st.Sys().(*syscall.Stat_t).Uid)
		}
		var okA, deniedB, createA bool
		f, _ := os.Open(p)
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var e audit.Entry
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				t.Fatalf("audit line %q: %v", sc.Text(), err)
			}
			switch {
			case e.Method == "/boxd.v1.SandboxService/ExecStream" || e.Method == "/boxd.v1.SandboxService/Exec" || e.Method == "/boxd.v1.ProcessService/Exec":
				if e.UID == int64(ua.uid) && e.PID == int32(pid) && e.Sandbox == sbA && e.Result == "ok" {
					okA = true
				}
				if e.UID == int64(ub.uid) && e.PID == int32(pidB) && e.Sandbox == sbA && e.Result == "not_found" {
					deniedB = true
				}
			case e.Method == "/boxd.v1.SandboxService/CreateSandbox" && e.UID == int64(ua.uid) && e.Sandbox == sbA && e.Result == "ok":
				createA = true
			case strings.HasSuffix(e.Method, "/ListSandboxes") || strings.HasSuffix(e.Method, "/GetSandbox"):
				t.Errorf("read-only call audited: %s", sc.Text())
			}
		}
		if !okA || !deniedB || !createA {
			t.Errorf("audit log lacks a's exec ok (pid %d): %v, b's refused exec (pid %d): %v, a's create: %v\n%s", pid, okA, pidB, deniedB, createA, tail(p))
		}
	})

	t.Run("after SIGKILL", func(t *testing.T) {
		d.kill()
		d.start(t)
		if _, err := apiB.sb.Exec(c, connect.NewRequest(&boxdv1.ExecRequest{SandboxId: sbA, Args: []string{"true"}})); connect.CodeOf(err) != connect.CodeNotFound {
			t.Errorf("b's exec in a's after restart: %v", err)
		}
		if _, err := apiA.sb.Exec(c, connect.NewRequest(&boxdv1.ExecRequest{SandboxId: sbA, Args: []string{"true"}})); err != nil {
			t.Errorf("a's exec in its own after restart: %v", err)
		}
		_, stderr, code, _ := as(ua, "create", "--memory", "64m")
		if code == 0 || !strings.Contains(stderr, "max-sandboxes-per-user") {
			t.Errorf("quota after restart: exit %d %s", code, stderr)
		}
	})

	// Streams that name no sandbox (events, stats of all, images): b gets
	// nothing of a's, or is refused.
	t.Run("streams", func(t *testing.T) {
		execIn := func(u hostUser, id string) func(args ...string) {
			return func(args ...string) {
				if _, stderr, code, _ := as(u, append([]string{"exec", id, "--"}, args...)...); code != 0 {
					t.Fatalf("exec as %s in %s: exit %d %s", u.name, id, code, stderr)
				}
			}
		}
		volA := volumeOf(t, func(args ...string) (string, string, int) {
			out, stderr, code, _ := as(ua, args...)
			return out, stderr, code
		})
		w := streamWorld{a: ua, b: ub, sbA: sbA, sbB: sbB, volA: volA, apiB: apiAs(ub, d.sock), execA: execIn(ua, sbA), execB: execIn(ub, sbB)}
		for _, sc := range streamCases {
			t.Run(sc.name, func(t *testing.T) { sc.check(t, c, w) })
		}
	})
}
