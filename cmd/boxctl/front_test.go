//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// buildCLIs builds the front and the full CLI side by side, with the
// Makefile's flags.
func buildCLIs(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "boxctl-front-test")
		if buildErr != nil {
			return
		}
		goTool, err := exec.LookPath("go")
		if err != nil {
			goTool = "/usr/local/go/bin/go"
		}
		for _, args := range [][]string{
			{"build", "-o", filepath.Join(binDir, "boxctl"), "."},
			{"build", "-tags", "urfave_cli_no_docs", "-o", filepath.Join(binDir, "boxctl-full"), "../boxctl-full"},
		} {
			if out, err := exec.Command(goTool, args...).CombinedOutput(); err != nil {
				buildErr = errors.New(string(out))
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatalf("build: %v", buildErr)
	}
	return binDir
}

// scripted answers exec by the sandbox id: one script per way boxd can
// answer, including ways today's boxd does not. The front's fast path
// asks ExecStream and the full CLI ProcessService.Exec; both play the same
// script.
type scripted struct {
	boxdv1connect.UnimplementedSandboxServiceHandler
}

// execOut is where a script sends: a stream's stdout, stderr and result.
type execOut struct {
	out, errOut func(string) error
	result      func(*boxdv1.ExecResult) error
}

func (scripted) ExecStream(_ context.Context, req *connect.Request[boxdv1.ExecRequest], s *connect.ServerStream[boxdv1.ExecStreamResponse]) error {
	return play(req.Msg.SandboxId, req.Msg.Args, req.Msg.Env, req.Msg.Workdir, req.Msg.Timeout, execOut{
		out: func(b string) error {
			return s.Send(&boxdv1.ExecStreamResponse{Event: &boxdv1.ExecStreamResponse_Stdout{Stdout: []byte(b)}})
		},
		errOut: func(b string) error {
			return s.Send(&boxdv1.ExecStreamResponse{Event: &boxdv1.ExecStreamResponse_Stderr{Stderr: []byte(b)}})
		},
		result: func(r *boxdv1.ExecResult) error {
			return s.Send(&boxdv1.ExecStreamResponse{Event: &boxdv1.ExecStreamResponse_Result{Result: r}})
		},
	})
}

// scriptedProcess answers ProcessService.Exec with the same scripts.
type scriptedProcess struct {
	boxdv1connect.UnimplementedProcessServiceHandler
}

func (scriptedProcess) Exec(_ context.Context, s *connect.BidiStream[boxdv1.ProcessInput, boxdv1.ProcessOutput]) error {
	in, err := s.Receive()
	if err != nil {
		return err
	}
	spec := in.GetStart()
	if spec == nil {
		return connect.NewError(connect.CodeInvalidArgument, errors.New("the first message is not start"))
	}
	return play(spec.SandboxId, spec.Args, spec.Env, spec.Workdir, spec.Timeout, execOut{
		out: func(b string) error {
			return s.Send(&boxdv1.ProcessOutput{Event: &boxdv1.ProcessOutput_Stdout{Stdout: []byte(b)}})
		},
		errOut: func(b string) error {
			return s.Send(&boxdv1.ProcessOutput{Event: &boxdv1.ProcessOutput_Stderr{Stderr: []byte(b)}})
		},
		result: func(r *boxdv1.ExecResult) error {
			return s.Send(&boxdv1.ProcessOutput{Event: &boxdv1.ProcessOutput_Result{Result: r}})
		},
	})
}

// play runs the script named id.
func play(id string, args, env []string, workdir, timeout string, o execOut) error {
	switch id {
	case "echo":
		_ = o.out(strings.Join(args, "|") + "\n" + strings.Join(env, "|") + "\n" + workdir + "\n" + timeout + "\n")
		return o.result(&boxdv1.ExecResult{})
	case "unicode-error":
		return connect.NewError(connect.CodeNotFound, errors.New("sandbox \"é<&>\u2028\" gone\nsecond line\t\x01"))
	case "output-then-error":
		_ = o.out("partial\n")
		_ = o.errOut("e\n")
		return connect.NewError(connect.CodeUnavailable, errors.New("agent gone"))
	case "no-result":
		return o.out("x")
	case "result-then-error":
		_ = o.result(&boxdv1.ExecResult{ExitCode: 3})
		return connect.NewError(connect.CodeInternal, errors.New("late"))
	case "truncated":
		_ = o.out("some")
		return o.result(&boxdv1.ExecResult{ExitCode: 7, Truncated: true})
	case "odd-code":
		return connect.NewError(connect.Code(99), errors.New("from the future"))
	case "plain-error":
		return errors.New("not a connect error")
	case "negative-exit":
		return o.result(&boxdv1.ExecResult{ExitCode: -1})
	case "exit-300":
		return o.result(&boxdv1.ExecResult{ExitCode: 300})
	case "big":
		chunk := bytes.Repeat([]byte("0123456789abcde\n"), 4096)
		for i := range 40 {
			if i%3 == 0 {
				_ = o.errOut(string(chunk[:1000+i]))
			}
			if err := o.out(string(chunk)); err != nil {
				return err
			}
		}
		return o.result(&boxdv1.ExecResult{ExitCode: 1})
	}
	return connect.NewError(connect.CodeNotFound, errors.New("no script"))
}

// TestFrontAgainstScriptedBoxd runs the front's fast path and the full CLI
// against a connect-go server answering in every way the protocol allows,
// and wants the same stdout, stderr and exit code from both.
func TestFrontAgainstScriptedBoxd(t *testing.T) {
	dir := buildCLIs(t)
	sock := serveScripted(t)
	run := runCLI(t)
	for _, args := range [][]string{
		{"exec", "echo", "--", "sh", "-c", "x"},
		{"exec", "-e", "A=1", "-e", "B=ü\"\\", "-w", "/w", "--timeout=3s", "echo", "a\x01b", "\u2028"},
		{"exec", "unicode-error", "--", "true"},
		{"exec", "output-then-error", "--", "true"},
		{"exec", "no-result", "--", "true"},
		{"exec", "result-then-error", "--", "true"},
		{"exec", "truncated", "--", "true"},
		{"exec", "odd-code", "--", "true"},
		{"exec", "plain-error", "--", "true"},
		{"exec", "negative-exit", "--", "true"},
		{"exec", "exit-300", "--", "true"},
		{"exec", "big", "--", "true"},
	} {
		args := append([]string{"--socket", sock}, args...)
		fo, fe, fc := run(filepath.Join(dir, "boxctl"), []string{"BOXCTL_NO_FULL=1"}, args...)
		wo, we, wc := run(filepath.Join(dir, "boxctl-full"), nil, args...)
		if fo != wo || fe != we || fc != wc {
			t.Errorf("%q:\nfront: exit %d, stdout %d bytes %.80q, stderr %.200q\nfull:  exit %d, stdout %d bytes %.80q, stderr %.200q",
				args, fc, len(fo), fo, fe, wc, len(wo), wo, we)
		}
	}
}

// serveScripted serves scripted on a Unix socket until the test ends.
func serveScripted(t *testing.T) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "boxd.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(boxdv1connect.NewSandboxServiceHandler(scripted{}))
	mux.Handle(boxdv1connect.NewProcessServiceHandler(scriptedProcess{}))
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: mux, Protocols: protocols}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return sock
}

// runCLI returns a function running a CLI binary as "boxctl" with env added,
// returning its stdout, stderr and exit code.
func runCLI(t *testing.T) func(bin string, env []string, args ...string) (string, string, int) {
	return func(bin string, env []string, args ...string) (string, string, int) {
		cmd := exec.Command(bin, args...)
		cmd.Args[0] = "boxctl"
		cmd.Env = append(os.Environ(), env...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
	}
}

// got refuses a request, showing it: the CLI prints the message, so a test
// sees what the CLI sent.
func got(m proto.Message) error {
	b, err := protojson.Marshal(m)
	if err != nil {
		return err
	}
	var compact bytes.Buffer // protojson's spacing varies on purpose
	if err := json.Compact(&compact, b); err != nil {
		return err
	}
	return connect.NewError(connect.CodeFailedPrecondition, errors.New("got "+compact.String()))
}

func (scripted) ForkSandbox(_ context.Context, req *connect.Request[boxdv1.ForkSandboxRequest]) (*connect.Response[boxdv1.ForkSandboxResponse], error) {
	return nil, got(req.Msg)
}

func (scripted) UpdateSandbox(_ context.Context, req *connect.Request[boxdv1.UpdateSandboxRequest]) (*connect.Response[boxdv1.UpdateSandboxResponse], error) {
	return nil, got(req.Msg)
}

func (scripted) DeleteSandbox(_ context.Context, req *connect.Request[boxdv1.DeleteSandboxRequest]) (*connect.Response[boxdv1.DeleteSandboxResponse], error) {
	return nil, got(req.Msg)
}

func (scripted) StopSandbox(_ context.Context, req *connect.Request[boxdv1.StopSandboxRequest]) (*connect.Response[boxdv1.StopSandboxResponse], error) {
	return nil, got(req.Msg)
}

func (scripted) GetSandbox(_ context.Context, req *connect.Request[boxdv1.GetSandboxRequest]) (*connect.Response[boxdv1.GetSandboxResponse], error) {
	return nil, got(req.Msg)
}

func (scripted) RemoveImage(_ context.Context, req *connect.Request[boxdv1.RemoveImageRequest]) (*connect.Response[boxdv1.RemoveImageResponse], error) {
	return nil, got(req.Msg)
}

func (scripted) TagImage(_ context.Context, req *connect.Request[boxdv1.TagImageRequest]) (*connect.Response[boxdv1.TagImageResponse], error) {
	return nil, got(req.Msg)
}

// TestFlagsAfterArguments runs each argument list through the front
// (cmd/boxctl, whose fast path reads exec, handing the rest to the full
// CLI) and through the full CLI (cmd/boxctl-full) against the scripted
// boxd, and wants both to agree: the same stdout, stderr and exit code.
// Where a case names an equivalent list (the flags written first), the
// full CLI must answer that one the same way too; want is a piece of
// what they print (the request boxd got, or the refusal).
func TestFlagsAfterArguments(t *testing.T) {
	dir := buildCLIs(t)
	sock := serveScripted(t)
	run := runCLI(t)
	cases := []struct {
		args string // split on spaces
		same string // an equivalent argument list, flags first
		want string // in stdout or stderr
		fast bool   // the front's fast path serves it (BOXCTL_NO_FULL=1)
	}{
		// A flag after the id, a value flag after it, a bool flag after it.
		{args: "fork SB -n 2", same: "fork -n 2 SB", want: `"count":2`},
		{args: "fork SB -n=2 --name a -e A=1", same: "fork -n=2 --name a -e A=1 SB", want: `"names":["a"]`},
		{args: "fork --name a SB --name b", same: "fork --name a --name b SB", want: `"names":["a","b"]`},
		{args: "update SB --extend 30m", same: "update --extend 30m SB", want: `"extend":"30m"`},
		{args: "update SB --memory 512m --cpus 1.5", same: "update --memory 512m --cpus 1.5 SB", want: `"cpus":1.5`},
		{args: "stop SB -t 3s", same: "stop -t 3s SB", want: `"timeout":"3s"`},
		{args: "rm SB --force", same: "rm --force SB", want: `"force":true`},
		{args: "rm SB1 -f SB2", same: "rm -f SB1 SB2", want: `"id":"SB2"`},
		{args: "image rm busybox --force", same: "image rm --force busybox", want: `"force":true`},
		{args: "image tag a b --force", same: "image tag --force a b", want: `"force":true`},
		{args: "image tag a b", want: `"source":"a","target":"b"`},
		// "--" ends the flags: the words after it are arguments.
		{args: "rm -- -x", want: `"id":"-x"`},
		{args: "rm -f -- -x", same: "rm -f -- -x", want: `"id":"-x"`},
		{args: "rm SB -- -f", want: `"id":"-f"`},
		{args: "fork SB -- -n 2", want: "usage: boxctl fork"},
		{args: "inspect -- SB", same: "inspect SB", want: `"id":"SB"`},
		// An unknown flag is refused, wherever it is written.
		{args: "inspect SB --bogus", same: "inspect --bogus SB", want: "flag provided but not defined: -bogus"},
		{args: "fork SB --bogus 2", want: "flag provided but not defined: -bogus"},
		{args: "update SB --extend", want: "flag needs an argument: -extend"},
		// exec stops at the sandbox id, as docker exec does at the
		// container: what follows is the command's, -la included.
		{args: "exec echo ls -la", same: "exec echo -- ls -la", want: "ls|-la\n", fast: true},
		{args: "exec echo ls --timeout 5s", want: "ls|--timeout|5s\n\n\n\n", fast: true},
		{args: "exec echo --timeout 5s -- true", want: "--timeout|5s|--|true\n", fast: true},
		{args: "exec --timeout 5s echo -- true", want: "true\n\n\n5s\n", fast: true},
		{args: "exec echo -- -- -n", want: "--|-n\n", fast: true},
		// run stops at the command too (boxd refuses the create here).
		{args: "run -- ls -la", same: "run ls -la"},
		// session exec stops at ID NAME: the command's words are its own.
		{args: "session exec SB NAME ls --timeout 5s"},
	}
	front, full := filepath.Join(dir, "boxctl"), filepath.Join(dir, "boxctl-full")
	for _, tc := range cases {
		args := append([]string{"--socket", sock}, strings.Split(tc.args, " ")...)
		var env []string
		if tc.fast {
			env = []string{"BOXCTL_NO_FULL=1"}
		}
		fo, fe, fc := run(front, env, args...)
		wo, we, wc := run(full, nil, args...)
		if fo != wo || fe != we || fc != wc {
			t.Errorf("%q: front and full CLI differ:\nfront: exit %d, stdout %q, stderr %q\nfull:  exit %d, stdout %q, stderr %q",
				tc.args, fc, fo, fe, wc, wo, we)
		}
		if tc.want != "" && !strings.Contains(wo+we, tc.want) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %q in them", tc.args, wc, wo, we, tc.want)
		}
		if tc.same != "" {
			so, se, sc := run(full, nil, append([]string{"--socket", sock}, strings.Split(tc.same, " ")...)...)
			if so != wo || se != we || sc != wc {
				t.Errorf("%q and %q differ:\n%q: exit %d, stdout %q, stderr %q\n%q: exit %d, stdout %q, stderr %q",
					tc.args, tc.same, tc.args, wc, wo, we, tc.same, sc, so, se)
			}
		}
	}
}
