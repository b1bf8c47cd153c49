package boxd

import (
	"context"
	"io"
	"time"

	"connectrpc.com/connect"

	"github.com/boxd-dev/boxd/rpc/apiwire"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// Sandbox is one sandbox in boxd.
type Sandbox struct {
	ID   string
	Name string
	// Info is what boxd said of the sandbox when this value was made
	// (Create, Get, List, Refresh): state, limits, ports, network...
	Info *boxdv1.Sandbox
	c    *Client
}

// Cmd is a command to run in a sandbox. Only Args is required.
type Cmd struct {
	Args    []string      // the program and its arguments, looked up in PATH
	Env     []string      // KEY=VALUE, added to the sandbox's environment
	Dir     string        // working directory; default the sandbox's
	User    string        // NAME, UID, NAME:GROUP or UID:GID; default the sandbox's
	Stdin   []byte        // the command's standard input; none: empty
	Timeout time.Duration // killed (with every process it started) after this; 0: the sandbox's default
	// OutputLimit bounds the bytes of stdout and stderr kept (beyond it the
	// result says Truncated); 0: the sandbox's default.
	OutputLimit int64
	// CombinedOutput gives the command one pipe for stdout and stderr
	// (2>&1): Run returns them, as written, in Result.Stdout.
	CombinedOutput bool
	// Resume runs the command even if the sandbox is paused, resuming it.
	Resume bool
}

// Result is how a command ended. A command that ran and failed is a
// Result with a non-zero ExitCode, not an error.
type Result struct {
	Stdout, Stderr []byte // for Stream, empty: the output went to its writers
	ExitCode       int
	Signal         string // the signal that killed it, e.g. "SIGKILL"
	TimedOut       bool   // killed at its timeout
	Truncated      bool   // output beyond its limit was dropped
	OOMKilled      bool   // killed by the kernel's OOM killer
	// Info is the API's whole result (times, CPU and memory use, pid).
	Info *boxdv1.ExecResult
}

// StdoutString is Stdout as a string.
func (r *Result) StdoutString() string { return string(r.Stdout) }

// StderrString is Stderr as a string.
func (r *Result) StderrString() string { return string(r.Stderr) }

// maxStdin is the most stdin one exec request carries: the message limit
// less room for the request's other fields.
const maxStdin = apiwire.MaxMessageBytes - 64<<10

func (s *Sandbox) request(cmd Cmd) (*boxdv1.ExecRequest, error) {
	if len(cmd.Args) == 0 {
		return nil, newError(connect.CodeInvalidArgument, "args: no command")
	}
	if len(cmd.Stdin) > maxStdin {
		return nil, newError(connect.CodeInvalidArgument, "stdin: more than 8 MiB; write the data to a file (Files().Write) and redirect from it")
	}
	if cmd.Timeout < 0 {
		return nil, newError(connect.CodeInvalidArgument, "timeout: negative duration "+cmd.Timeout.String())
	}
	return &boxdv1.ExecRequest{
		SandboxId: s.ID, Args: cmd.Args, Env: cmd.Env, Workdir: cmd.Dir, User: cmd.User,
		Stdin: cmd.Stdin, Timeout: duration(cmd.Timeout), OutputLimit: cmd.OutputLimit,
		CombinedOutput: cmd.CombinedOutput, Resume: cmd.Resume,
	}, nil
}

func result(r *boxdv1.ExecResult) *Result {
	return &Result{
		ExitCode: int(r.GetExitCode()), Signal: r.GetSignal(), TimedOut: r.GetTimedOut(),
		Truncated: r.GetTruncated(), OOMKilled: r.GetOomKilled(), Info: r,
	}
}

// Exec runs args in the sandbox and returns its output and exit code once
// it has ended.
func (s *Sandbox) Exec(ctx context.Context, args ...string) (*Result, error) {
	return s.Run(ctx, Cmd{Args: args})
}

// Run runs cmd and returns its output and exit code once it has ended.
func (s *Sandbox) Run(ctx context.Context, cmd Cmd) (*Result, error) {
	req, err := s.request(cmd)
	if err != nil {
		return nil, err
	}
	res, err := s.c.api.Sandboxes.Exec(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, wrap(err)
	}
	r := result(res.Msg.GetResult())
	r.Stdout, r.Stderr = res.Msg.GetStdout(), res.Msg.GetStderr()
	if cmd.CombinedOutput {
		r.Stdout = res.Msg.GetResult().GetOutput()
	}
	return r, nil
}

// Stream runs cmd and writes its output to stdout and stderr (either may
// be nil: discarded) as it comes, then returns how it ended. With
// CombinedOutput both streams go to stdout.
func (s *Sandbox) Stream(ctx context.Context, cmd Cmd, stdout, stderr io.Writer) (*Result, error) {
	req, err := s.request(cmd)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // a writer's error ends the call, and the command
	st, err := s.c.api.Sandboxes.ExecStream(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, wrap(err)
	}
	defer st.Close()
	var res *Result
	for st.Receive() {
		var w io.Writer
		var data []byte
		switch ev := st.Msg().GetEvent().(type) {
		case *boxdv1.ExecStreamResponse_Stdout:
			w, data = stdout, ev.Stdout
		case *boxdv1.ExecStreamResponse_Stderr:
			w, data = stderr, ev.Stderr
		case *boxdv1.ExecStreamResponse_Result:
			res = result(ev.Result)
		}
		if w != nil && len(data) > 0 {
			if _, err := w.Write(data); err != nil {
				return nil, err
			}
		}
	}
	if err := st.Err(); err != nil {
		return nil, wrap(err)
	}
	if res == nil {
		return nil, newError(connect.CodeUnavailable, apiwire.LostConnection+": the stream ended without a result")
	}
	return res, nil
}

// Refresh fetches the sandbox's current Info (with its usage figures).
func (s *Sandbox) Refresh(ctx context.Context) error {
	res, err := s.c.api.Sandboxes.GetSandbox(ctx, connect.NewRequest(&boxdv1.GetSandboxRequest{Id: s.ID}))
	if err != nil {
		return wrap(err)
	}
	s.Info = res.Msg.GetSandbox()
	return nil
}

// Delete deletes the sandbox: SIGTERM to every process, SIGKILL after
// grace (0: boxd's default, 10s), then its files are gone.
func (s *Sandbox) Delete(ctx context.Context, grace time.Duration) error {
	_, err := s.c.api.Sandboxes.DeleteSandbox(ctx, connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: s.ID, Timeout: duration(grace)}))
	return wrap(err)
}

// closeTimeout bounds Close's call.
const closeTimeout = time.Minute

// Close deletes the sandbox at once (SIGKILL to every process, as
// `docker rm -f`), for defer. A sandbox already gone is no error, so
// Close may follow Delete.
func (s *Sandbox) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	_, err := s.c.api.Sandboxes.DeleteSandbox(ctx, connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: s.ID, Force: true}))
	if connect.CodeOf(err) == connect.CodeNotFound {
		return nil
	}
	return wrap(err)
}

// Files is the sandbox's file API.
func (s *Sandbox) Files() *Files { return &Files{sb: s} }
