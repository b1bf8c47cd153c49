//go:build linux

package main

import (
	"bytes"
	"context"
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

// scripted answers ExecStream by the sandbox id: one script per way boxd
// can answer, including ways today's boxd does not.
type scripted struct {
	boxdv1connect.UnimplementedSandboxServiceHandler
}

func (scripted) ExecStream(_ context.Context, req *connect.Request[boxdv1.ExecRequest], s *connect.ServerStream[boxdv1.ExecStreamResponse]) error {
	out := func(b string) error {
		return s.Send(&boxdv1.ExecStreamResponse{Event: &boxdv1.ExecStreamResponse_Stdout{Stdout: []byte(b)}})
	}
	errOut := func(b string) error {
		return s.Send(&boxdv1.ExecStreamResponse{Event: &boxdv1.ExecStreamResponse_Stderr{Stderr: []byte(b)}})
	}
	result := func(r *boxdv1.ExecResult) error {
		return s.Send(&boxdv1.ExecStreamResponse{Event: &boxdv1.ExecStreamResponse_Result{Result: r}})
	}
	switch req.Msg.SandboxId {
	case "echo":
		_ = out(strings.Join(req.Msg.Args, "|") + "\n" + strings.Join(req.Msg.Env, "|") + "\n" + req.Msg.Workdir + "\n" + req.Msg.Timeout + "\n")
		return result(&boxdv1.ExecResult{})
	case "unicode-error":
		return connect.NewError(connect.CodeNotFound, errors.New("sandbox \"é<&>\u2028\" gone\nsecond line\t\x01"))
	case "output-then-error":
		_ = out("partial\n")
		_ = errOut("e\n")
		return connect.NewError(connect.CodeUnavailable, errors.New("agent gone"))
	case "no-result":
		return out("x")
	case "result-then-error":
		_ = result(&boxdv1.ExecResult{ExitCode: 3})
		return connect.NewError(connect.CodeInternal, errors.New("late"))
	case "truncated":
		_ = out("some")
		return result(&boxdv1.ExecResult{ExitCode: 7, Truncated: true})
	case "odd-code":
		return connect.NewError(connect.Code(99), errors.New("from the future"))
	case "plain-error":
		return errors.New("not a connect error")
	case "negative-exit":
		return result(&boxdv1.ExecResult{ExitCode: -1})
	case "exit-300":
		return result(&boxdv1.ExecResult{ExitCode: 300})
	case "big":
		chunk := bytes.Repeat([]byte("0123456789abcde\n"), 4096)
		for i := range 40 {
			if i%3 == 0 {
				_ = errOut(string(chunk[:1000+i]))
			}
			if err := out(string(chunk)); err != nil {
				return err
			}
		}
		return result(&boxdv1.ExecResult{ExitCode: 1})
	}
	return connect.NewError(connect.CodeNotFound, errors.New("no script"))
}

// TestFrontAgainstScriptedBoxd runs the front's fast path and the full CLI
// against a connect-go server answering in every way the protocol allows,
// and wants the same stdout, stderr and exit code from both.
func TestFrontAgainstScriptedBoxd(t *testing.T) {
	dir := buildCLIs(t)
	sock := filepath.Join(t.TempDir(), "boxd.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(boxdv1connect.NewSandboxServiceHandler(scripted{}))
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: mux, Protocols: protocols}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })

	run := func(bin string, env []string, args ...string) (string, string, int) {
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
