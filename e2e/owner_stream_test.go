//go:build linux

package e2e

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
)

// Streaming calls and other users. A stream that names a sandbox is in
// sandboxRPCs (not_found for another user's); the rest are here: the
// events and stats streams, which show a caller its own sandboxes only,
// and the image streams, which need an admin. TestOwnership runs both
// tables as user b against user a; TestOwnershipCoversStreams fails when
// a streaming RPC is in neither.

// streamWorld is what a streamCase needs: b's clients, and a's and b's
// users and sandboxes, and a way to run a command in a's sandbox as a.
type streamWorld struct {
	a, b     hostUser
	sbA, sbB string
	volA     [2]string // a's volume: its name and its id
	apiB     clientsAs
	execA    func(args ...string) // as user a, in sbA
	execB    func(args ...string) // as user b, in sbB
}

// streamCase performs one streaming RPC as user b on what user a has and
// fails t unless b was refused or shown nothing of a's.
type streamCase struct {
	name  string // SERVICE.METHOD
	check func(t *testing.T, c context.Context, w streamWorld)
}

var streamCases = []streamCase{
	{"VolumeService.CopyIntoVolume", func(t *testing.T, c context.Context, w streamWorld) {
		copyIn := func(name string) error {
			s := w.apiB.volumes.CopyIntoVolume(c)
			err := s.Send(&boxdv1.CopyIntoVolumeRequest{Name: name, Path: "/", Data: oneFileTar(t, "planted", "from b")})
			if err == nil || errors.Is(err, io.EOF) {
				_, err = s.CloseAndReceive()
			}
			return err
		}
		sameAsMissing(t, "b's CopyIntoVolume", w.volA, copyIn)
	}},
	{"VolumeService.CopyFromVolume", func(t *testing.T, c context.Context, w streamWorld) {
		copyOut := func(name string) error {
			s, err := w.apiB.volumes.CopyFromVolume(c, connect.NewRequest(&boxdv1.CopyFromVolumeRequest{Name: name, Path: "/secret"}))
			if err != nil {
				return err
			}
			defer s.Close()
			for s.Receive() {
				if len(s.Msg().Data) > 0 {
					return errors.New("b received data from a's volume")
				}
			}
			return s.Err()
		}
		sameAsMissing(t, "b's CopyFromVolume", w.volA, copyOut)
	}},
	{"VolumeService.ReadVolumeFile", func(t *testing.T, c context.Context, w streamWorld) {
		read := func(name string) error {
			s, err := w.apiB.volumes.ReadVolumeFile(c, connect.NewRequest(&boxdv1.ReadVolumeFileRequest{Name: name, Path: "/secret"}))
			if err != nil {
				return err
			}
			defer s.Close()
			for s.Receive() {
				if len(s.Msg().Data) > 0 || s.Msg().Info != nil {
					return errors.New("b received a's volume file")
				}
			}
			return s.Err()
		}
		sameAsMissing(t, "b's ReadVolumeFile", w.volA, read)
	}},
	{"EventService.Events", func(t *testing.T, c context.Context, w streamWorld) {
		// Follow first: a's command runs while b's stream is live.
		got := followAround(t, c, w.apiB.events, w.sbB, func() { w.execA("sh", "-c", "export AWS_SECRET_ACCESS_KEY=followsecret; true") }, w.execB)
		onlyOwn(t, "b's followed events", got, w.b.uid, w.sbA, "followsecret")
		for _, filters := range [][]string{nil, {"sandbox=" + w.sbA}} {
			s, err := w.apiB.events.Events(c, connect.NewRequest(&boxdv1.EventsRequest{Since: "1h", Filters: filters}))
			if err != nil {
				t.Fatalf("b's replay %v: %v", filters, err)
			}
			var evs []*boxdv1.Event
			for s.Receive() {
				evs = append(evs, s.Msg().Event)
			}
			if err := s.Err(); err != nil {
				t.Fatalf("b's replay %v: %v", filters, err)
			}
			onlyOwn(t, "b's replayed events", evs, w.b.uid, w.sbA, "followsecret")
		}
	}},
	{"SandboxService.Stats", func(t *testing.T, c context.Context, w streamWorld) {
		// Without ids; with a's id it is in sandboxRPCs.
		s, err := w.apiB.sb.Stats(c, connect.NewRequest(&boxdv1.StatsRequest{Interval: "100ms"}))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if !s.Receive() {
			t.Fatalf("b's stats: %v", s.Err())
		}
		var ids []string
		for _, st := range s.Msg().Sandboxes {
			ids = append(ids, st.Id)
		}
		if slices.Contains(ids, w.sbA) || !slices.Contains(ids, w.sbB) {
			t.Errorf("b's stats without ids show %v; want b's %s and not a's %s", ids, w.sbB, w.sbA)
		}
	}},
	{"SandboxService.ImportImage", func(t *testing.T, c context.Context, w streamWorld) {
		s := w.apiB.sb.ImportImage(c)
		_ = s.Send(&boxdv1.ImportImageRequest{Name: testImage, Force: true, Data: []byte("x")})
		_, err := s.CloseAndReceive()
		wantDenied(t, "b's ImportImage", err)
	}},
	{"SandboxService.BuildImage", func(t *testing.T, c context.Context, w streamWorld) {
		s := w.apiB.sb.BuildImage(c)
		_ = s.Send(&boxdv1.BuildImageRequest{Ref: testImage, Force: true, Dockerfile: []byte("FROM " + testImage + "\n")})
		_, err := s.CloseAndReceive()
		wantDenied(t, "b's BuildImage", err)
	}},
	{"RegistryService.PullImage", func(t *testing.T, c context.Context, w streamWorld) {
		wantDenied(t, "b's PullImage", drainStream(w.apiB.registry.PullImage(c, connect.NewRequest(&boxdv1.PullImageRequest{Reference: "127.0.0.1:1/boxd/x:latest", Force: true}))))
	}},
	{"RegistryService.PushImage", func(t *testing.T, c context.Context, w streamWorld) {
		wantDenied(t, "b's PushImage", drainStream(w.apiB.registry.PushImage(c, connect.NewRequest(&boxdv1.PushImageRequest{Reference: "127.0.0.1:1/boxd/x:latest", Source: testImage}))))
	}},
	{"CodeService.RunCode", func(t *testing.T, c context.Context, w streamWorld) {
		// And the context calls: all name a sandbox, a's is not found.
		calls := map[string]func(id string) error{
			"RunCode": func(id string) error {
				return drainStream(w.apiB.code.RunCode(c, connect.NewRequest(&boxdv1.RunCodeRequest{SandboxId: id, Code: "1"})))
			},
			"ListCodeContexts": func(id string) error {
				_, err := w.apiB.code.ListCodeContexts(c, connect.NewRequest(&boxdv1.ListCodeContextsRequest{SandboxId: id}))
				return err
			},
			"RestartCodeContext": func(id string) error {
				_, err := w.apiB.code.RestartCodeContext(c, connect.NewRequest(&boxdv1.RestartCodeContextRequest{SandboxId: id, Context: "default"}))
				return err
			},
			"DeleteCodeContext": func(id string) error {
				_, err := w.apiB.code.DeleteCodeContext(c, connect.NewRequest(&boxdv1.DeleteCodeContextRequest{SandboxId: id, Context: "default"}))
				return err
			},
		}
		const missing = "0123456789ab"
		for name, call := range calls {
			want := call(missing)
			err := call(w.sbA)
			if connect.CodeOf(want) != connect.CodeNotFound || connect.CodeOf(err) != connect.CodeNotFound ||
				err.Error() != strings.ReplaceAll(want.Error(), missing, w.sbA) {
				t.Errorf("b's %s on a's sandbox: %v; on a missing one: %v; want the same not_found", name, err, want)
			}
		}
	}},
}

func wantDenied(t *testing.T, what string, err error) {
	t.Helper()
	if connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("%s: %v, want permission_denied", what, err)
	}
}

// onlyOwn fails t if an event is not of the stream's own user (uid), is
// about another's sandbox, or carries secret.
func onlyOwn(t *testing.T, what string, evs []*boxdv1.Event, uid uint32, sandbox, secret string) {
	t.Helper()
	for _, ev := range evs {
		b, _ := json.Marshal(ev)
		if ev.OwnerUid != uid || ev.Sandbox == sandbox || strings.Contains(string(b), secret) {
			t.Errorf("%s include one not the caller's (uid %d): %s", what, uid, b)
		}
	}
}

// followAround opens a follow stream, waits until it is live, runs act,
// then sentinel (a command in the follower's own sandbox own), and
// returns every event the stream got up to the sentinel's exec_exited:
// anything act caused was emitted before it.
func followAround(t *testing.T, c context.Context, evs boxdv1connect.EventServiceClient, own string, act func(), sentinel func(args ...string)) []*boxdv1.Event {
	t.Helper()
	fc, cancel := context.WithTimeout(c, time.Minute)
	defer cancel()
	s, err := evs.Events(fc, connect.NewRequest(&boxdv1.EventsRequest{Follow: true}))
	if err != nil {
		t.Fatalf("follow: %v", err)
	}
	defer s.Close()
	if !s.Receive() || !s.Msg().Live {
		t.Fatalf("follow: no live marker: %v", s.Err())
	}
	act()
	sentinel("true")
	var got []*boxdv1.Event
	for s.Receive() {
		ev := s.Msg().Event
		got = append(got, ev)
		if ev.Sandbox == own && ev.Type == "exec_exited" {
			return got
		}
	}
	t.Fatalf("follow ended before the sentinel: %v (got %d events)", s.Err(), len(got))
	return nil
}

// TestOwnershipCoversStreams: every streaming RPC of boxd's services (as
// the generated descriptors list them) is performed by TestOwnership as
// another user: in sandboxRPCs (not_found) or in streamCases (filtered or
// refused). A streaming RPC added without either fails here.
func TestOwnershipCoversStreams(t *testing.T) {
	const pkg = "boxd.v1."
	methods := map[protoreflect.FullName]protoreflect.MethodDescriptor{}
	protoregistry.GlobalFiles.RangeFilesByPackage("boxd.v1", func(fd protoreflect.FileDescriptor) bool {
		for i := 0; i < fd.Services().Len(); i++ {
			for j := 0; j < fd.Services().Get(i).Methods().Len(); j++ {
				m := fd.Services().Get(i).Methods().Get(j)
				methods[m.FullName()] = m
			}
		}
		return true
	})
	covered := map[protoreflect.FullName]bool{}
	for _, sc := range streamCases {
		covered[protoreflect.FullName(pkg+sc.name)] = true
	}
	// sandboxRPCs names a call by its method: ProcessService's as
	// Process.X, the others' as X, of the first of these services that
	// has it.
	for _, rc := range sandboxRPCs {
		if m, ok := strings.CutPrefix(rc.name, "Process."); ok {
			covered[protoreflect.FullName(pkg+"ProcessService."+m)] = true
			continue
		}
		for _, svc := range []string{"SandboxService", "FileService", "ProcessService"} {
			if name := protoreflect.FullName(pkg + svc + "." + rc.name); methods[name] != nil {
				covered[name] = true
				break
			}
		}
	}
	n := 0
	for name, m := range methods {
		if !m.IsStreamingClient() && !m.IsStreamingServer() {
			continue
		}
		n++
		if !covered[name] {
			t.Errorf("streaming RPC %s is in neither sandboxRPCs nor streamCases: TestOwnership does not perform it as another user", name)
		}
	}
	if n < 18 {
		t.Errorf("found %d streaming RPCs in package boxd.v1; the services were not all walked", n)
	}
}

// ownerDaemon starts a boxd for the two-user tests (socket and admin
// groups from hostUsers) with a copy of boxctl the test users can run.
func ownerDaemon(t *testing.T, sockGroup, adminGroup string, flags ...string) (*daemon, string) {
	t.Helper()
	d := startBoxd(t, "boxd-e2e-owner-ev", true, append([]string{"--socket-group", sockGroup, "--admin-group", adminGroup, "--default-memory", "128m"}, flags...)...)
	if err := os.Chmod(filepath.Dir(d.dir), 0o711); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"boxctl", "boxctl-full"} {
		if b, err := os.ReadFile(filepath.Join(filepath.Dir(env.boxctl), name)); err != nil || os.WriteFile(filepath.Join(d.dir, name), b, 0o755) != nil {
			t.Fatalf("copy %s: %v", name, err)
		}
	}
	return d, filepath.Join(d.dir, "boxctl")
}

// jsonEvent is a line of boxctl events --json.
type jsonEvent struct {
	Type     string            `json:"type"`
	Sandbox  string            `json:"sandbox"`
	OwnerUID uint32            `json:"owner_uid"`
	Attrs    map[string]string `json:"attrs"`
	line     string
}

func parseEventLines(t *testing.T, out string) []jsonEvent {
	t.Helper()
	var evs []jsonEvent
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		var ev jsonEvent
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("events line %q: %v", l, err)
		}
		ev.line = l
		evs = append(evs, ev)
	}
	return evs
}

// boxctlFollower is `boxctl events --json` (following) run as a user.
type boxctlFollower struct {
	cmd   *exec.Cmd
	lines chan string
	seen  []jsonEvent
}

func followAs(t *testing.T, bin string, u hostUser, sock string) *boxctlFollower {
	t.Helper()
	cmd := exec.Command(bin, "--socket", sock, "events", "--json")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.uid, Gid: u.gid, Groups: u.groups}}
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/"}
	cmd.Dir = "/"
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f := &boxctlFollower{cmd: cmd, lines: make(chan string, 1024)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f.lines <- sc.Text()
		}
		close(f.lines)
		_, _ = io.Copy(io.Discard, out)
	}()
	t.Cleanup(f.stop)
	return f
}

func (f *boxctlFollower) stop() {
	if f.cmd.Process != nil {
		_ = f.cmd.Process.Kill()
		_ = f.cmd.Wait()
	}
}

// until reads lines until one matches (true) or the timeout (false).
func (f *boxctlFollower) until(t *testing.T, d time.Duration, match func(jsonEvent) bool) bool {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case l, ok := <-f.lines:
			if !ok {
				return false
			}
			ev := parseEventLines(t, l)[0]
			f.seen = append(f.seen, ev)
			if match(ev) {
				return true
			}
		case <-timeout:
			return false
		}
	}
}

// TestEventsOwnership: user b, on the same socket as user a, neither
// replays nor follows a's events (a ran a command with a secret in its
// arguments), stats without ids show b none of a's sandboxes, exec events
// carry no arguments unless boxd runs with --events-argv (and then only
// the owner and admins see them), and the events files are root's alone,
// made so again at start if they were left readable.
func TestEventsOwnership(t *testing.T) {
	sockGroup, adminGroup, ua, ub, uc := hostUsers(t)
	d, bin := ownerDaemon(t, sockGroup, adminGroup)
	as := func(u hostUser, args ...string) (string, string, int) {
		t.Helper()
		out, stderr, code, _ := boxctlAs(t, bin, u, d.sock, args...)
		return out, stderr, code
	}
	create := func(u hostUser) string {
		t.Helper()
		out, stderr, code := as(u, "create")
		if code != 0 {
			t.Fatalf("create as %s: exit %d: %s", u.name, code, stderr)
		}
		return strings.TrimSpace(out)
	}
	sbA, sbB := create(ua), create(ub)
	// round is the attack: b follows (boxctl events) while a runs a command
	// whose arguments hold secret, then b replays the last 30 minutes.
	round := func(t *testing.T, secret string) (follow, replay []jsonEvent) {
		f := followAs(t, bin, ub, d.sock)
		// Live once b's follower shows b's own exec.
		live := false
		for i := 0; i < 20 && !live; i++ {
			as(ub, "exec", sbB, "--", "true")
			live = f.until(t, 2*time.Second, func(ev jsonEvent) bool { return ev.Sandbox == sbB })
		}
		if !live {
			t.Fatalf("b's follower shows none of b's own events: %v", f.seen)
		}
		if _, stderr, code := as(ua, "exec", sbA, "--", "sh", "-c", "export AWS_SECRET_ACCESS_KEY="+secret+"; true"); code != 0 {
			t.Fatalf("a's exec: exit %d %s", code, stderr)
		}
		f.seen = nil
		as(ub, "exec", sbB, "--", "echo", "sentinel")
		if !f.until(t, 30*time.Second, func(ev jsonEvent) bool { return ev.Sandbox == sbB && ev.Type == "exec_exited" }) {
			t.Fatalf("b's follower missed b's sentinel: %v", f.seen)
		}
		follow = f.seen
		f.stop()
		out, stderr, code := as(ub, "events", "--since", "30m", "--no-follow", "--json")
		if code != 0 {
			t.Fatalf("b's replay: exit %d %s", code, stderr)
		}
		return follow, parseEventLines(t, out)
	}
	othersNone := func(t *testing.T, what string, evs []jsonEvent, secret string) {
		t.Helper()
		for _, ev := range evs {
			if ev.Sandbox == sbA || ev.OwnerUID != ub.uid || strings.Contains(ev.line, secret) {
				t.Errorf("%s: b got an event not its own: %s", what, ev.line)
			}
		}
	}
	// execOf finds the exec_started of a's command in u's replay.
	execOf := func(t *testing.T, u hostUser) jsonEvent {
		t.Helper()
		out, stderr, code := as(u, "events", "--since", "30m", "--no-follow", "--json", "--filter", "sandbox="+sbA, "--filter", "type=exec_started")
		if code != 0 {
			t.Fatalf("%s's replay: exit %d %s", u.name, code, stderr)
		}
		evs := parseEventLines(t, out)
		if len(evs) == 0 {
			t.Fatalf("%s's replay lacks a's exec_started:\n%s", u.name, out)
		}
		return evs[len(evs)-1]
	}

	t.Run("default", func(t *testing.T) {
		follow, replay := round(t, "defaultsecret")
		othersNone(t, "follow", follow, "defaultsecret")
		othersNone(t, "replay", replay, "defaultsecret")
		if len(replay) == 0 {
			t.Error("b's replay is empty: b's own events are missing")
		}
		for _, u := range []hostUser{ua, uc} {
			ev := execOf(t, u)
			if ev.OwnerUID != ua.uid || len(ev.Attrs) != 0 || strings.Contains(ev.line, "defaultsecret") {
				t.Errorf("%s's view of a's exec_started: %s; want owner_uid %d and no arguments", u.name, ev.line, ua.uid)
			}
		}
	})

	t.Run("stats", func(t *testing.T) {
		out, stderr, code := as(ub, "stats", "--no-stream", "--json")
		if code != 0 || strings.Contains(out, sbA) || !strings.Contains(out, sbB) {
			t.Errorf("b's stats without ids (exit %d %s) must show b's %s and not a's %s:\n%s", code, stderr, sbB, sbA, out)
		}
		_, stderr, code = as(ub, "stats", "--no-stream", sbA)
		if code == 0 || !strings.Contains(stderr, "not_found") {
			t.Errorf("b's stats of a's sandbox: exit %d %s; want not_found", code, stderr)
		}
		if out, _, code := as(uc, "stats", "--no-stream", "--json", sbA); code != 0 || !strings.Contains(out, sbA) {
			t.Errorf("admin's stats of a's sandbox: exit %d %s", code, out)
		}
	})

	evDir := filepath.Join(d.dir, "state", "events")
	t.Run("file mode", func(t *testing.T) {
		checkMode := func(t *testing.T) {
			t.Helper()
			for p, want := range map[string]os.FileMode{evDir: 0o700, filepath.Join(evDir, "events.jsonl"): 0o600} {
				st, err := os.Stat(p)
				if err != nil {
					t.Fatal(err)
				}
				if st.Mode().Perm() != want || st.Sys().(*syscall.Stat_t).Uid != 0 {
					t.Errorf("%s: mode %v uid %d, want %v root", p, st.Mode().Perm(), st.Sys().(*syscall.Stat_t).Uid, want)
				}
			}
		}
		checkMode(t)
		// Left readable (by hand, or an older boxd): fixed at start.
		if os.Chmod(evDir, 0o755) != nil || os.Chmod(filepath.Join(evDir, "events.jsonl"), 0o644) != nil {
			t.Fatal("chmod")
		}
		d.kill()
		d.start(t)
		checkMode(t)
	})

	t.Run("events-argv", func(t *testing.T) {
		d.kill()
		d.args = append(d.args, "--events-argv")
		d.start(t)
		follow, replay := round(t, "argvsecret")
		othersNone(t, "follow", follow, "argvsecret")
		othersNone(t, "replay", replay, "argvsecret")
		for _, u := range []hostUser{ua, uc} {
			ev := execOf(t, u)
			if ev.OwnerUID != ua.uid || !strings.Contains(ev.Attrs["args"], "AWS_SECRET_ACCESS_KEY=argvsecret") {
				t.Errorf("%s's view of a's exec_started with --events-argv: %s; want a's arguments", u.name, ev.line)
			}
		}
	})
}

// volumeOf makes a volume as a user (boxctl as that user) and returns its
// name and id.
func volumeOf(t *testing.T, as func(args ...string) (string, string, int)) [2]string {
	t.Helper()
	if _, stderr, code := as("volume", "create", "ownedbya", "--size", "16m"); code != 0 {
		t.Fatalf("a's volume create: %s", stderr)
	}
	out, stderr, code := as("volume", "inspect", "ownedbya")
	var v struct {
		ID string `json:"id"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.ID == "" {
		t.Fatalf("a's volume inspect: exit %d %s %s", code, out, stderr)
	}
	return [2]string{"ownedbya", v.ID}
}

// sameAsMissing fails t unless call on a's volume, by name and by id, is
// not_found with the message a volume that does not exist gets.
func sameAsMissing(t *testing.T, what string, vol [2]string, call func(name string) error) {
	t.Helper()
	missing := call("nosuchvolume")
	for _, name := range vol {
		err := call(name)
		if connect.CodeOf(err) != connect.CodeNotFound {
			t.Errorf("%s of a's volume %s: %v, want not_found", what, name, err)
			continue
		}
		if strings.ReplaceAll(err.Error(), name, "X") != strings.ReplaceAll(missing.Error(), "nosuchvolume", "X") {
			t.Errorf("%s of a's volume %s: %q differs from a missing volume's %q", what, name, err, missing)
		}
	}
}

// oneFileTar is a tar holding one regular file.
func oneFileTar(t *testing.T, name, body string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write([]byte(body)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
