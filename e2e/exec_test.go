//go:build linux

package e2e

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

func TestExec(t *testing.T) {
	id := newSandbox(t, "--env", "BASE=base")
	for _, tc := range []struct {
		name     string
		args     []string
		wantOut  string
		wantErr  string
		wantCode int
	}{
		{"streams kept apart", []string{"--", "sh", "-c", "echo one; echo two >&2; echo three"}, "one\nthree\n", "two\n", 0},
		{"exit code", []string{"--", "sh", "-c", "exit 3"}, "", "", 3},
		{"argv is not reparsed", []string{"--", "echo", "a b", "$HOME", "*"}, "a b $HOME *\n", "", 0},
		{"missing command", []string{"--", "no-such-command"}, "", "no-such-command", 127},
		{"per-exec env", []string{"--env", "X=1", "--env", "BASE=over", "--", "sh", "-c", "echo $X$BASE"}, "1over\n", "", 0},
		{"sandbox env inherited", []string{"--", "sh", "-c", "echo $BASE"}, "base\n", "", 0},
		{"per-exec workdir", []string{"--workdir", "/tmp", "--", "pwd"}, "/tmp\n", "", 0},
		{"default workdir", []string{"--", "pwd"}, "/workspace\n", "", 0},
		{"killed by signal", []string{"--", "sh", "-c", "kill -9 $$"}, "", "", 137},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"exec"}, tc.args[:indexOf(tc.args, "--")]...)
			args = append(append(args, id), tc.args[indexOf(tc.args, "--"):]...)
			out, stderr, code := boxctlRun(args...)
			if code != tc.wantCode || out != tc.wantOut || !strings.Contains(stderr, tc.wantErr) {
				t.Errorf("exit %d stdout %q stderr %q; want %d %q containing %q", code, out, stderr, tc.wantCode, tc.wantOut, tc.wantErr)
			}
		})
	}
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return len(s)
}

func TestExecTimeoutKillsTree(t *testing.T) {
	id := newSandbox(t)
	start := time.Now()
	_, _, code := boxctlRun("exec", "--timeout", "500ms", id, "--", "sh", "-c", "sleep 300 & sleep 301 & sleep 302")
	if code != 124 {
		t.Errorf("timeout exit = %d, want 124", code)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("timeout took %v", d)
	}
	// No sleep survives: the whole tree was killed, background children too.
	out := sh(t, id, "ps -o comm,args | grep 'sleep 30' | grep -v grep || true")
	if strings.TrimSpace(out) != "" {
		t.Errorf("processes survived the timeout:\n%s", out)
	}

	// The API reports timed_out too.
	resp, err := env.api.Exec(ctx(t), connect.NewRequest(&boxdv1.ExecRequest{SandboxId: id, Args: []string{"sleep", "10"}, Timeout: "200ms"}))
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.Msg.Result; !r.TimedOut || r.ExitCode != 124 {
		t.Errorf("result = %+v, want timed_out and 124", r)
	}
}

func TestExecUnaryAPI(t *testing.T) {
	id := newSandbox(t)
	resp, err := env.api.Exec(ctx(t), connect.NewRequest(&boxdv1.ExecRequest{
		SandboxId: id, Args: []string{"sh", "-c", "cat; echo e >&2; exit 5"}, Stdin: []byte("from stdin\n"),
	}))
	if err != nil {
		t.Fatal(err)
	}
	m := resp.Msg
	if string(m.Stdout) != "from stdin\n" || string(m.Stderr) != "e\n" || m.Result.ExitCode != 5 {
		t.Errorf("exec = stdout %q stderr %q result %+v", m.Stdout, m.Stderr, m.Result)
	}
	if m.Result.StartedAt == "" || m.Result.EndedAt == "" || m.Result.MaxRssBytes <= 0 {
		t.Errorf("result lacks times or rusage: %+v", m.Result)
	}
	// The output cap truncates and says so.
	resp, err = env.api.Exec(ctx(t), connect.NewRequest(&boxdv1.ExecRequest{
		SandboxId: id, Args: []string{"sh", "-c", "yes | head -c 100000"}, OutputLimit: 1000,
	}))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Msg.Stdout) > 1000 || !resp.Msg.Result.Truncated {
		t.Errorf("capped exec: %d bytes, truncated=%v", len(resp.Msg.Stdout), resp.Msg.Result.Truncated)
	}
}

// TestExecSlowReaderGetsEverything: a command that writes more than the
// pipes and sockets hold and exits at once, read by a client that starts
// reading only a second later. Everything it wrote arrives: the init
// keeps draining its pipes after the exit while they still hold output (it
// used to close them 100 ms after the exit and drop what was left).
func TestExecSlowReaderGetsEverything(t *testing.T) {
	id := newSandbox(t)
	const size = 8 << 20
	for _, tc := range []string{"stdout", "stderr"} {
		cmd := "head -c 8388608 /dev/zero | tr '\\0' x"
		if tc == "stderr" {
			cmd += " >&2"
		}
		stream, err := env.api.ExecStream(ctx(t), connect.NewRequest(&boxdv1.ExecRequest{SandboxId: id, Args: []string{"sh", "-c", cmd}, OutputLimit: 16 << 20}))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second) // the command is long done; its output waits in pipes and buffers
		var got int
		var res *boxdv1.ExecResult
		for stream.Receive() {
			m := stream.Msg()
			got += len(m.GetStdout()) + len(m.GetStderr())
			if r := m.GetResult(); r != nil {
				res = r
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		stream.Close()
		if got != size || res == nil || res.ExitCode != 0 || res.Truncated {
			t.Errorf("%s: got %d of %d bytes, result %+v", tc, got, size, res)
		}
	}
}

// The three ways to run a command and wait for it (SandboxService.Exec,
// ExecStream and ProcessService.Exec) are one call in boxd: for the same
// command they give the same output and the same result, exit status,
// timeout and truncation included.
func TestExecThreeAPIsAgree(t *testing.T) {
	id := newSandbox(t)
	type outcome struct {
		stdout, stderr  string
		exit            int32
		signal          string
		timedOut, trunc bool
	}
	of := func(stdout, stderr []byte, r *boxdv1.ExecResult) outcome {
		return outcome{string(stdout), string(stderr), r.GetExitCode(), r.GetSignal(), r.GetTimedOut(), r.GetTruncated()}
	}
	for _, tc := range []struct {
		args    []string
		env     []string
		workdir string
		user    string
		timeout string
		limit   int64
	}{
		{args: []string{"sh", "-c", `echo "out $FOO $(pwd) $(id -u)"; echo err >&2; exit 3`}, env: []string{"FOO=bar"}, workdir: "/tmp", user: "1000"},
		{args: []string{"sh", "-c", "kill -TERM $$"}},
		{args: []string{"sleep", "5"}, timeout: "300ms"},
		{args: []string{"sh", "-c", "yes | head -c 100000"}, limit: 1000},
		{args: []string{"/no/such/command"}},
	} {
		req := &boxdv1.ExecRequest{SandboxId: id, Args: tc.args, Env: tc.env, Workdir: tc.workdir, User: tc.user, Timeout: tc.timeout, OutputLimit: tc.limit}
		unary, err := env.api.Exec(ctx(t), connect.NewRequest(req))
		if err != nil {
			t.Fatalf("%v: Exec: %v", tc.args, err)
		}
		want := of(unary.Msg.Stdout, unary.Msg.Stderr, unary.Msg.Result)

		stream, err := env.api.ExecStream(ctx(t), connect.NewRequest(req))
		if err != nil {
			t.Fatalf("%v: ExecStream: %v", tc.args, err)
		}
		var sout, serr bytes.Buffer
		var sres *boxdv1.ExecResult
		for stream.Receive() {
			switch ev := stream.Msg().Event.(type) {
			case *boxdv1.ExecStreamResponse_Stdout:
				sout.Write(ev.Stdout)
			case *boxdv1.ExecStreamResponse_Stderr:
				serr.Write(ev.Stderr)
			case *boxdv1.ExecStreamResponse_Result:
				sres = ev.Result
			}
		}
		if err := stream.Err(); err != nil || sres == nil {
			t.Fatalf("%v: ExecStream: %v (result %v)", tc.args, err, sres)
		}
		if got := of(sout.Bytes(), serr.Bytes(), sres); got != want {
			t.Errorf("%v: ExecStream gives %+v, Exec %+v", tc.args, got, want)
		}

		pc := startExec(t, ctx(t), &boxdv1.ProcessSpec{SandboxId: id, Args: tc.args, Env: tc.env, Workdir: tc.workdir,
			User: tc.user, Timeout: tc.timeout, OutputLimit: tc.limit})
		pc.stream.CloseRequest()
		pres := pc.result()
		if got := of(pc.stdout.Bytes(), pc.stderr.Bytes(), pres); got != want {
			t.Errorf("%v: ProcessService.Exec gives %+v, Exec %+v", tc.args, got, want)
		}
	}
}

// StatPath is FileService.StatFile's stat in StatPath's shape: the same
// answer for the same path, symlinks not followed, and looked at as root
// whoever the sandbox's default user is.
func TestStatPathAgreesWithStatFile(t *testing.T) {
	id := newSandbox(t, "--user", "1000")
	sh(t, id, "true") // as 1000: the sandbox is up
	if _, stderr, code := boxctlRun("exec", "--user", "0", id, "--", "sh", "-c",
		"mkdir -p /root/private && echo secret > /root/private/f && chmod 700 /root /root/private && ln -sf /etc/hostname /tmp/link"); code != 0 {
		t.Fatalf("setup: exit %d: %s", code, stderr)
	}
	for _, p := range []string{"/", "/etc", "/tmp/link", "/root/private/f"} {
		sp, err := env.api.StatPath(ctx(t), connect.NewRequest(&boxdv1.StatPathRequest{SandboxId: id, Path: p}))
		if err != nil {
			t.Fatalf("StatPath %s: %v", p, err)
		}
		sf, err := filesAPI().StatFile(ctx(t), connect.NewRequest(&boxdv1.StatFileRequest{SandboxId: id, Path: p, User: "0"}))
		if err != nil {
			t.Fatalf("StatFile %s: %v", p, err)
		}
		a, b := sp.Msg, sf.Msg.Info
		if a.Name != b.Name || a.Size != b.Size || a.Mode != b.Mode&0o777 || a.IsDir != (b.Type == boxdv1.FileType_FILE_TYPE_DIRECTORY) ||
			a.Mtime != b.Mtime || a.LinkTarget != b.LinkTarget {
			t.Errorf("%s: StatPath %+v, StatFile %+v", p, a, b)
		}
	}
	_, err := env.api.StatPath(ctx(t), connect.NewRequest(&boxdv1.StatPathRequest{SandboxId: id, Path: "/no/such"}))
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("StatPath of a missing path: %v, want not_found", err)
	}
}
