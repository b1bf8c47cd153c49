package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// maxWait bounds how long process_read waits for a process to exit: a tool
// call that blocks longer looks hung to the agent and its user.
const maxWait = 5 * time.Minute

type startIn struct {
	SandboxID      string   `json:"sandbox_id" jsonschema:"id or name of the sandbox"`
	Command        string   `json:"command,omitempty" jsonschema:"shell command line, run with /bin/sh -c; give this or args"`
	Args           []string `json:"args,omitempty" jsonschema:"program and arguments, run without a shell; give this or command"`
	Workdir        string   `json:"workdir,omitempty" jsonschema:"working directory; default the sandbox's"`
	Env            []string `json:"env,omitempty" jsonschema:"extra environment, as KEY=VALUE"`
	TimeoutSeconds float64  `json:"timeout_seconds,omitempty" jsonschema:"kill the process after this many seconds; default: never"`
}

type processIn struct {
	SandboxID string `json:"sandbox_id" jsonschema:"id or name of the sandbox"`
	ProcessID string `json:"process_id" jsonschema:"the id process_start returned, e.g. p1"`
}

type readProcessIn struct {
	SandboxID   string  `json:"sandbox_id" jsonschema:"id or name of the sandbox"`
	ProcessID   string  `json:"process_id" jsonschema:"the id process_start returned, e.g. p1"`
	WaitSeconds float64 `json:"wait_seconds,omitempty" jsonschema:"wait up to this many seconds for the process to exit before answering; 0 (default): answer at once; at most 300"`
	OutputLimit int64   `json:"output_limit_bytes,omitempty" jsonschema:"bytes kept of each of stdout and stderr, their ends; default 65536, at most 4194304"`
}

type killIn struct {
	SandboxID string `json:"sandbox_id" jsonschema:"id or name of the sandbox"`
	ProcessID string `json:"process_id" jsonschema:"the id process_start returned, e.g. p1"`
	Signal    string `json:"signal,omitempty" jsonschema:"signal name or number, e.g. SIGTERM or 15; default SIGKILL, which kills the whole process tree"`
}

type processOut struct {
	ID       string `json:"process_id"`
	PID      int64  `json:"pid"`
	State    string `json:"state" jsonschema:"running or exited"`
	ExitCode *int32 `json:"exit_code,omitempty" jsonschema:"once exited"`
	TimedOut bool   `json:"timed_out,omitempty"`
	Command  string `json:"command"`
}

type readProcessOut struct {
	processOut
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	Dropped  int64  `json:"dropped_bytes" jsonschema:"bytes left out from the start of the output to keep output_limit_bytes"`
	RingLost bool   `json:"ring_lost,omitempty" jsonschema:"the start of the output is gone from boxd's 1 MiB ring as well"`
}

type processListOut struct {
	Processes []processOut `json:"processes"`
}

func (s *Server) addProcesses(srv *mcp.Server) {
	addTool(s, srv, &mcp.Tool{
		Name:        "process_start",
		Description: "Start a command in the background (a server, a long build) and return its process id at once. boxd keeps the last 1 MiB of its output; read it with process_read.",
	}, s.processStart)
	addTool(s, srv, &mcp.Tool{
		Name:        "process_read",
		Description: "Read a background process's state and output so far, optionally waiting for it to exit.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, s.processRead)
	addTool(s, srv, &mcp.Tool{
		Name:        "process_kill",
		Description: "Send a signal to a background process (default SIGKILL, which ends its whole process tree).",
	}, s.processKill)
	addTool(s, srv, &mcp.Tool{
		Name:        "process_list",
		Description: "List the background processes of a sandbox, running or exited.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, s.processList)
}

func processOf(p *boxdv1.ProcessInfo) processOut {
	o := processOut{ID: p.GetId(), PID: p.GetPid(), State: p.GetState(), Command: strings.Join(p.GetArgs(), " ")}
	if r := p.GetResult(); r != nil && p.GetState() == "exited" {
		o.ExitCode, o.TimedOut = ptr(r.GetExitCode()), r.GetTimedOut()
	}
	return o
}

func (o processOut) line() string {
	s := fmt.Sprintf("process %s (pid %d) %s", o.ID, o.PID, o.State)
	if o.ExitCode != nil {
		s += fmt.Sprintf(", exit code %d", *o.ExitCode)
	}
	if o.TimedOut {
		s += ", killed at its timeout"
	}
	return s + ": " + o.Command
}

func (s *Server) processStart(ctx context.Context, _ *mcp.CallToolRequest, in startIn) (*mcp.CallToolResult, processOut, error) {
	args, err := execArgs(execIn{SandboxID: in.SandboxID, Command: in.Command, Args: in.Args})
	if err != nil {
		return nil, processOut{}, err
	}
	spec := &boxdv1.ProcessSpec{SandboxId: in.SandboxID, Args: args, Env: in.Env, Workdir: in.Workdir}
	if in.TimeoutSeconds < 0 {
		return nil, processOut{}, fmt.Errorf("timeout_seconds %v: must not be negative", in.TimeoutSeconds)
	} else if in.TimeoutSeconds > 0 {
		spec.Timeout = time.Duration(in.TimeoutSeconds * float64(time.Second)).String()
	}
	resp, err := s.procs.Start(ctx, connect.NewRequest(&boxdv1.StartProcessRequest{Spec: spec}))
	if err != nil {
		return nil, processOut{}, describe("start a process in sandbox "+in.SandboxID, err)
	}
	o := processOf(resp.Msg.GetProcess())
	return text("started " + o.line()), o, nil
}

func (s *Server) processRead(ctx context.Context, _ *mcp.CallToolRequest, in readProcessIn) (*mcp.CallToolResult, readProcessOut, error) {
	if in.SandboxID == "" || in.ProcessID == "" {
		return nil, readProcessOut{}, fmt.Errorf("sandbox_id and process_id are required")
	}
	wait := time.Duration(in.WaitSeconds * float64(time.Second))
	if wait < 0 || wait > maxWait {
		return nil, readProcessOut{}, fmt.Errorf("wait_seconds %v: must be between 0 and %v", in.WaitSeconds, maxWait.Seconds())
	}
	limit := int64(defaultOutputLimit)
	if in.OutputLimit < 0 || in.OutputLimit > maxOutputLimit {
		return nil, readProcessOut{}, fmt.Errorf("output_limit_bytes %d: must be between 0 and %d", in.OutputLimit, maxOutputLimit)
	} else if in.OutputLimit > 0 {
		limit = in.OutputLimit
	}
	out, err := s.attach(ctx, in.SandboxID, in.ProcessID, wait, limit)
	if err != nil {
		return nil, readProcessOut{}, describe("read process "+in.ProcessID, err)
	}
	var b strings.Builder
	b.WriteString(out.line() + "\n")
	if out.Dropped > 0 {
		fmt.Fprintf(&b, "[output truncated: the first %d bytes are left out; showing the end]\n", out.Dropped)
	}
	if out.RingLost {
		b.WriteString("[output truncated: its start is gone from boxd's 1 MiB buffer; redirect to a file to keep it all]\n")
	}
	fmt.Fprintf(&b, "--- stdout ---\n%s", out.Stdout)
	if out.Stdout != "" && !strings.HasSuffix(out.Stdout, "\n") {
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "--- stderr ---\n%s", out.Stderr)
	return text(b.String()), out, nil
}

// attach reads a process's buffered output, following it for up to wait,
// and keeps the last limit bytes of each stream.
func (s *Server) attach(ctx context.Context, sandbox, proc string, wait time.Duration, limit int64) (readProcessOut, error) {
	var out readProcessOut
	// The wait ends the stream from this side with a timer, not with a
	// context deadline: a deadline would go to boxd as the call's timeout,
	// and boxd's deadline_exceeded could then arrive before this side's
	// context reports that it is done, turning a normal end of the wait
	// into an error.
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	var waited atomic.Bool
	if wait > 0 {
		t := time.AfterFunc(wait, func() { waited.Store(true); cancel() })
		defer t.Stop()
	}
	stream := s.procs.Attach(actx)
	defer stream.CloseResponse()
	if err := stream.Send(&boxdv1.ProcessInput{Event: &boxdv1.ProcessInput_Attach{Attach: &boxdv1.AttachRequest{
		SandboxId: sandbox, ProcessId: proc, NoFollow: wait == 0,
	}}}); err != nil && !errors.Is(err, io.EOF) {
		return out, err
	}
	_ = stream.CloseRequest()
	var stdout, stderr tail
	stdout.max, stderr.max = limit, limit
	var info *boxdv1.ProcessInfo
	var result *boxdv1.ExecResult
	for {
		m, err := stream.Receive()
		if err != nil {
			if errors.Is(err, io.EOF) || (waited.Load() && ctx.Err() == nil) {
				break // no_follow's end, or the wait is over: the process runs on
			}
			return out, err
		}
		switch e := m.GetEvent().(type) {
		case *boxdv1.ProcessOutput_Process:
			info = e.Process
		case *boxdv1.ProcessOutput_Stdout:
			stdout.write(e.Stdout)
		case *boxdv1.ProcessOutput_Stderr:
			stderr.write(e.Stderr)
		case *boxdv1.ProcessOutput_Result:
			result = e.Result
		}
	}
	if info == nil {
		return out, fmt.Errorf("boxd sent no process description")
	}
	out.processOut = processOf(info)
	if result != nil {
		out.State, out.ExitCode, out.TimedOut = "exited", ptr(result.GetExitCode()), result.GetTimedOut()
		out.RingLost = result.GetTruncated()
	}
	out.Stdout, out.Stderr = printable(stdout.buf), printable(stderr.buf)
	out.Dropped = stdout.dropped + stderr.dropped
	return out, nil
}

// tail keeps the last max bytes written to it.
type tail struct {
	buf     []byte
	max     int64
	dropped int64
}

func (t *tail) write(p []byte) {
	t.buf = append(t.buf, p...)
	if over := int64(len(t.buf)) - t.max; over > 0 {
		t.dropped += over
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
}

func (s *Server) processKill(ctx context.Context, _ *mcp.CallToolRequest, in killIn) (*mcp.CallToolResult, processOut, error) {
	if in.SandboxID == "" || in.ProcessID == "" {
		return nil, processOut{}, fmt.Errorf("sandbox_id and process_id are required")
	}
	sig := in.Signal
	if sig == "" {
		sig = "SIGKILL"
	}
	resp, err := s.procs.Signal(ctx, connect.NewRequest(&boxdv1.SignalProcessRequest{SandboxId: in.SandboxID, ProcessId: in.ProcessID, Signal: sig}))
	if err != nil {
		return nil, processOut{}, describe("signal process "+in.ProcessID, err)
	}
	o := processOf(resp.Msg.GetProcess())
	return text(fmt.Sprintf("sent %s to %s", sig, o.line())), o, nil
}

func (s *Server) processList(ctx context.Context, _ *mcp.CallToolRequest, in idIn) (*mcp.CallToolResult, processListOut, error) {
	if in.SandboxID == "" {
		return nil, processListOut{}, fmt.Errorf("sandbox_id is required")
	}
	resp, err := s.procs.List(ctx, connect.NewRequest(&boxdv1.ListProcessesRequest{SandboxId: in.SandboxID}))
	if err != nil {
		return nil, processListOut{}, describe("list processes of sandbox "+in.SandboxID, err)
	}
	out := processListOut{Processes: []processOut{}}
	var b strings.Builder
	for _, p := range resp.Msg.GetProcesses() {
		o := processOf(p)
		out.Processes = append(out.Processes, o)
		b.WriteString(o.line() + "\n")
	}
	if len(out.Processes) == 0 {
		b.WriteString("no background processes\n")
	}
	return text(b.String()), out, nil
}
