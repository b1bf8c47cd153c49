package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"

	"github.com/containerd/errdefs"

	"github.com/boxd-dev/boxd/agent/wire"
)

// maxProcListPayload bounds a process or session list from the init: MaxProcesses
// infos of at most a few KiB each.
const maxProcListPayload = 768 << 10

// maxStartStdin bounds the stdin a background start carries in its request
// frame (base64 in JSON, so the frame stays below MaxFramePayload).
const maxStartStdin = 512 << 10

var processIDRe = regexp.MustCompile(`^p[0-9]{1,19}$`)

// processClassError adds an errdefs class to an init error whose code
// protocol.go's RemoteError does not know.
type processClassError struct {
	*wire.RemoteError
	class error
}

func (e processClassError) Unwrap() []error { return []error{e.RemoteError, e.class} }

// classifyProcErr maps the process operations' own error codes onto errdefs.
func classifyProcErr(err error) error {
	var re *wire.RemoteError
	if !errors.As(err, &re) {
		return err
	}
	switch re.Code {
	case wire.CodeResourceExhausted:
		return processClassError{re, errdefs.ErrResourceExhausted}
	case wire.CodeFailedPrecondition:
		return processClassError{re, errdefs.ErrFailedPrecondition}
	}
	return err
}

func (c *Client) openProcOp(ctx context.Context, op string, args any) (*conn, error) {
	req := wire.Request{Op: op}
	if args != nil {
		b, err := json.Marshal(args)
		if err != nil {
			return nil, fmt.Errorf("encode %s args: %w", op, err)
		}
		req.Args = b
	}
	return c.open(ctx, req)
}

// readProcJSON reads the single frame that ends an operation: want, decoded
// into v (at most max bytes), or an error frame.
func (cn *conn) readProcJSON(want wire.FrameType, v any, max int) error {
	return classifyProcErr(cn.readReplyMax(want, v, max))
}

func checkProcessInfo(info *wire.ProcessInfo) error {
	if !processIDRe.MatchString(info.ID) || (info.State != wire.StateRunning && info.State != wire.StateExited) ||
		(info.State == wire.StateExited) != (info.Result != nil) {
		return fmt.Errorf("%w: malformed process info (id %.32q, state %.32q)", wire.ErrProtocol, info.ID, info.State)
	}
	return nil
}

// ProcessEvent is one message of a running process's stream: output, or
// the final result.
type ProcessEvent struct {
	Stream wire.FrameType // FrameStdout or FrameStderr; zero with Result
	Data   []byte         // valid until the next call to Next
	Result *wire.ExecResult
}

// ProcessStream is a connection to a foreground process (ExecProcess) or an
// attached background one (AttachProcess). Next reads its output; the other
// methods send input and may be called concurrently with Next. Close ends
// the connection, which kills a foreground process.
type ProcessStream struct {
	cn    *conn
	ctx   context.Context
	op    string
	limit int64 // output bytes accepted; < 0 for no limit
	got   int64
	done  bool
	// uncontrolled: the stream runs on the exec op, which carries no
	// signal or resize requests.
	uncontrolled bool
	ended        bool
	// head, when stdin given with the request was too big to go inline,
	// is closed once a goroutine has sent it: later stdin and its close
	// wait for it, so the process reads its input in order.
	head chan struct{}
	// OnEnd, if set, sees how the command ended, once: its result before
	// Next returns it (boxd adds what only the host knows, such as
	// oom_killed), or the error that ended the stream (Close before the
	// result included), which it may rewrite.
	OnEnd func(res *wire.ExecResult, err error) error
	// OnStart, if set, sees the command's pid from its started frame
	// (ExecRequest.ReportStart), before any output.
	OnStart func(pid int)
	// pending is a frame AwaitStart read that was not the started one.
	pending *wire.Frame
}

// AwaitStart reads the stream's first frame when it is the started frame
// and hands its pid to OnStart; any other frame is kept for Next. A
// command that could not start sends none.
func (p *ProcessStream) AwaitStart() error {
	f, err := p.cn.fr.ReadFrame()
	if err != nil {
		if err == io.EOF {
			err = fmt.Errorf("%w: connection closed without a result", wire.ErrProtocol)
		}
		return fmt.Errorf("%s: %w", p.op, err)
	}
	if f.Type == wire.FrameStarted {
		p.started(f.Payload)
		return nil
	}
	p.pending = &f
	return nil
}

func (p *ProcessStream) started(payload []byte) {
	pid, err := strconv.Atoi(string(payload))
	if err == nil && pid > 0 && p.OnStart != nil {
		p.OnStart(pid)
	}
}

// Next returns the next output or the result. After the result, or when
// an attach that does not follow ends while the process still runs, it
// returns io.EOF.
func (p *ProcessStream) Next() (ProcessEvent, error) {
	if p.done {
		return ProcessEvent{}, io.EOF
	}
	ev, err := p.next()
	if err != nil && err != io.EOF {
		p.done = true
		return ProcessEvent{}, p.end(nil, fmt.Errorf("%s: %w", p.op, ctxErr(p.ctx, err)))
	}
	return ev, err
}

// end calls OnEnd, once.
func (p *ProcessStream) end(res *wire.ExecResult, err error) error {
	if p.ended || p.OnEnd == nil {
		return err
	}
	p.ended = true
	return p.OnEnd(res, err)
}

// Output copies the command's output to stdout and stderr (either may be
// nil to discard it) and returns its result.
func (p *ProcessStream) Output(stdout, stderr io.Writer) (wire.ExecResult, error) {
	for {
		ev, err := p.Next()
		if err == io.EOF {
			return wire.ExecResult{}, p.end(nil, fmt.Errorf("%s: %w: the stream ended without a result", p.op, wire.ErrProtocol))
		}
		if err != nil {
			return wire.ExecResult{}, err
		}
		if ev.Result != nil {
			return *ev.Result, nil
		}
		w := stdout
		if ev.Stream == wire.FrameStderr {
			w = stderr
		}
		if w != nil {
			if _, err := w.Write(ev.Data); err != nil {
				p.done = true
				return wire.ExecResult{}, p.end(nil, fmt.Errorf("%s: write %s: %w", p.op, ev.Stream, err))
			}
		}
	}
}

func (p *ProcessStream) readFrame() (wire.Frame, error) {
	if f := p.pending; f != nil {
		p.pending = nil
		return *f, nil
	}
	for {
		f, err := p.cn.fr.ReadFrame()
		if err == io.EOF {
			return f, fmt.Errorf("%w: connection closed without a result", wire.ErrProtocol)
		}
		if err != nil || f.Type != wire.FrameStarted {
			return f, err
		}
		p.started(f.Payload)
	}
}

func (p *ProcessStream) next() (ProcessEvent, error) {
	f, err := p.readFrame()
	if err != nil {
		return ProcessEvent{}, err
	}
	switch f.Type {
	case wire.FrameStdout, wire.FrameStderr:
		// The init enforces the limit; one that sends more is broken or
		// hostile, and the caller's memory is what is at stake.
		p.got += int64(len(f.Payload))
		if p.limit >= 0 && p.got > p.limit+startFailureSlack {
			return ProcessEvent{}, fmt.Errorf("%w: more output than the %d byte limit", wire.ErrProtocol, p.limit)
		}
		return ProcessEvent{Stream: f.Type, Data: f.Payload}, nil
	case wire.FrameResult, wire.FrameError:
		p.done = true
		if len(f.Payload) > MaxControlPayload {
			return ProcessEvent{}, fmt.Errorf("%w: %s frame of %d bytes", wire.ErrProtocol, f.Type, len(f.Payload))
		}
		if f.Type == wire.FrameError {
			return ProcessEvent{}, classifyProcErr(wire.DecodeRemoteError(f.Payload))
		}
		var res wire.ExecResult
		if err := json.Unmarshal(f.Payload, &res); err != nil {
			return ProcessEvent{}, fmt.Errorf("%w: malformed result: %v", wire.ErrProtocol, err)
		}
		// Kept is the channel's: the connection goes back to its pool
		// at Close.
		p.cn.clean, res.Kept = res.Kept, false
		if err := p.end(&res, nil); err != nil {
			return ProcessEvent{}, err
		}
		return ProcessEvent{Result: &res}, nil
	case wire.FrameOK:
		p.done = true
		return ProcessEvent{}, io.EOF
	}
	return ProcessEvent{}, wire.UnexpectedFrame(f.Type)
}

// Write sends stdin.
func (p *ProcessStream) Write(b []byte) (int, error) {
	if err := p.afterHead(); err != nil {
		return 0, err
	}
	return p.write(b)
}

// afterHead waits until the request's own stdin is sent, if a goroutine
// is still sending it.
func (p *ProcessStream) afterHead() error {
	if p.head == nil {
		return nil
	}
	select {
	case <-p.head:
		return nil
	case <-p.ctx.Done():
		return ctxErr(p.ctx, p.ctx.Err())
	}
}

func (p *ProcessStream) write(b []byte) (int, error) {
	n := 0
	for len(b) > 0 {
		k := min(len(b), wire.DataChunk)
		if err := p.cn.fw.WriteFrame(wire.FrameStdin, b[:k]); err != nil {
			return n, ctxErr(p.ctx, err)
		}
		n += k
		b = b[k:]
	}
	return n, nil
}

// CloseStdin ends the process's input (it reads EOF). On a terminal it
// does nothing: a terminal has no end of input.
func (p *ProcessStream) CloseStdin() error {
	if err := p.afterHead(); err != nil {
		return err
	}
	return ctxErr(p.ctx, p.cn.fw.WriteFrame(wire.FrameStdinClose, nil))
}

// Resize changes the size of the process's terminal, if it has one.
func (p *ProcessStream) Resize(ws wire.WindowSize) error { return p.sendControl(wire.CtlResize, ws) }

// Signal sends a signal ("SIGINT", "INT" or "2") to the process's group;
// SIGKILL kills its whole tree.
func (p *ProcessStream) Signal(sig string) error {
	return p.sendControl(wire.CtlSignal, wire.SignalArgs{Signal: sig})
}

func (p *ProcessStream) sendControl(op string, args any) error {
	if p.uncontrolled {
		return fmt.Errorf("%s: %s: %w: started without controls", p.op, op, errdefs.ErrFailedPrecondition)
	}
	b, err := json.Marshal(args)
	if err != nil {
		return err
	}
	return ctxErr(p.ctx, p.cn.fw.WriteJSON(wire.FrameRequest, wire.Request{Op: op, Args: b}))
}

// Close ends the connection. For a foreground process that has not
// finished, the init kills its tree.
func (p *ProcessStream) Close() error {
	if !p.done {
		p.end(nil, fmt.Errorf("%s: the stream was closed before the result", p.op))
	}
	p.cn.close()
	return nil
}

// ExecProcess starts spec in the foreground and returns its stream. With
// spec.StdinStream the process reads what is written to the stream until
// CloseStdin; without it, stdin ends after spec.Stdin.
//
// With controls the stream can signal the process and resize its terminal
// (the process-exec op). Without them, and without a terminal, it runs on
// the exec op, whose connection the init keeps for the next call when the
// command took no streamed stdin: the exec floor. Every init serves both.
func (c *Client) ExecProcess(ctx context.Context, spec wire.ProcessSpec, controls bool) (*ProcessStream, error) {
	var extra []byte
	streamed := spec.StdinStream
	if len(spec.Stdin) > maxInlineStdin {
		extra, spec.Stdin, spec.StdinStream = spec.Stdin, nil, true
	}
	p := &ProcessStream{ctx: ctx, limit: spec.OutputLimit, uncontrolled: !controls && !spec.Tty}
	if p.limit == 0 {
		p.limit = wire.DefaultOutputLimit
	}
	// Errors name the command as "exec", whichever op carries it: the
	// caller chose how to run it, not the op.
	p.op = fmt.Sprintf("exec %q", wire.Argv0(spec.Args))
	var err error
	if p.uncontrolled {
		p.cn, err = c.open(ctx, wire.Request{Op: wire.OpExec, Exec: &spec.ExecRequest})
	} else {
		p.cn, err = c.openProcOp(ctx, wire.OpProcessExec, spec)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.op, err)
	}
	if extra != nil {
		// Sent from a goroutine: the command may not read it before its
		// output is read. Later stdin waits for it (p.head).
		p.head = make(chan struct{})
		go func() {
			defer close(p.head)
			// The command may not read all of it; the init drops the rest
			// once it closes stdin.
			if _, err := p.write(extra); err == nil && !streamed {
				_ = p.cn.fw.WriteFrame(wire.FrameStdinClose, nil)
			}
		}()
	}
	return p, nil
}

// StartProcess starts spec in the background and returns its info, with
// the id to attach to, wait for or signal it. With spec.StdinStream its
// stdin stays open after spec.Stdin for attached clients to write.
func (c *Client) StartProcess(ctx context.Context, spec wire.ProcessSpec) (wire.ProcessInfo, error) {
	op := fmt.Sprintf("%s %q", wire.OpProcessStart, wire.Argv0(spec.Args))
	if len(spec.Stdin) > maxStartStdin {
		return wire.ProcessInfo{}, fmt.Errorf("%s: stdin of %d bytes, at most %d for a background process: %w",
			op, len(spec.Stdin), maxStartStdin, errdefs.ErrInvalidArgument)
	}
	var info wire.ProcessInfo
	err := c.procCall(ctx, wire.OpProcessStart, spec, &info, MaxControlPayload)
	if err == nil {
		err = checkProcessInfo(&info)
	}
	if err != nil {
		return wire.ProcessInfo{}, fmt.Errorf("%s: %w", op, err)
	}
	return info, nil
}

// procCall runs an operation whose reply is one JSON result frame.
func (c *Client) procCall(ctx context.Context, op string, args, reply any, max int) error {
	cn, err := c.openProcOp(ctx, op, args)
	if err != nil {
		return err
	}
	defer cn.close()
	return ctxErr(ctx, cn.readProcJSON(wire.FrameResult, reply, max))
}

// AttachProcess connects to a background process: the stream replays the
// output the init still holds, then follows the process until it exits
// (unless a.NoFollow). Closing the stream leaves the process running.
func (c *Client) AttachProcess(ctx context.Context, a wire.AttachArgs) (*ProcessStream, wire.ProcessInfo, error) {
	op := fmt.Sprintf("%s %s", wire.OpProcessAttach, a.ID)
	cn, err := c.openProcOp(ctx, wire.OpProcessAttach, a)
	if err != nil {
		return nil, wire.ProcessInfo{}, fmt.Errorf("%s: %w", op, err)
	}
	var info wire.ProcessInfo
	err = cn.readProcJSON(wire.FrameResult, &info, MaxControlPayload)
	if err == nil {
		err = checkProcessInfo(&info)
	}
	if err != nil {
		cn.close()
		return nil, wire.ProcessInfo{}, fmt.Errorf("%s: %w", op, ctxErr(ctx, err))
	}
	return &ProcessStream{cn: cn, ctx: ctx, op: op, limit: -1}, info, nil
}

// ListProcesses lists the background processes the init remembers, oldest
// first.
func (c *Client) ListProcesses(ctx context.Context) ([]wire.ProcessInfo, error) {
	var infos []wire.ProcessInfo
	err := c.procCall(ctx, wire.OpProcessList, nil, &infos, maxProcListPayload)
	if err == nil && len(infos) > wire.MaxProcesses {
		err = fmt.Errorf("%w: %d processes listed, at most %d exist", wire.ErrProtocol, len(infos), wire.MaxProcesses)
	}
	for i := range infos {
		if err == nil {
			err = checkProcessInfo(&infos[i])
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", wire.OpProcessList, err)
	}
	return infos, nil
}

// WaitProcess blocks until the process exits and returns its final info.
func (c *Client) WaitProcess(ctx context.Context, id string) (wire.ProcessInfo, error) {
	return c.processCall(ctx, wire.OpProcessWait, id, wire.ProcessRef{ID: id})
}

// SignalProcess sends sig to a background process's group; SIGKILL kills
// its whole tree. It fails with a failed-precondition error if the
// process has already exited.
func (c *Client) SignalProcess(ctx context.Context, id, sig string) (wire.ProcessInfo, error) {
	return c.processCall(ctx, wire.OpProcessSignal, id, wire.SignalArgs{ID: id, Signal: sig})
}

func (c *Client) processCall(ctx context.Context, op, id string, args any) (wire.ProcessInfo, error) {
	var info wire.ProcessInfo
	err := c.procCall(ctx, op, args, &info, MaxControlPayload)
	if err == nil {
		err = checkProcessInfo(&info)
	}
	if err != nil {
		return wire.ProcessInfo{}, fmt.Errorf("%s %s: %w", op, id, err)
	}
	return info, nil
}

// CreateSession starts a session's shell.
func (c *Client) CreateSession(ctx context.Context, spec wire.SessionSpec) (wire.SessionInfo, error) {
	var info wire.SessionInfo
	if err := c.procCall(ctx, wire.OpSessionCreate, spec, &info, MaxControlPayload); err != nil {
		return wire.SessionInfo{}, fmt.Errorf("%s %q: %w", wire.OpSessionCreate, spec.Name, err)
	}
	return info, nil
}

// ListSessions lists a sandbox's sessions.
func (c *Client) ListSessions(ctx context.Context) ([]wire.SessionInfo, error) {
	var infos []wire.SessionInfo
	err := c.procCall(ctx, wire.OpSessionList, nil, &infos, maxProcListPayload)
	if err == nil && len(infos) > wire.MaxSessions {
		err = fmt.Errorf("%w: %d sessions listed, at most %d exist", wire.ErrProtocol, len(infos), wire.MaxSessions)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", wire.OpSessionList, err)
	}
	return infos, nil
}

// RemoveSession kills a session's shell and everything it started.
func (c *Client) RemoveSession(ctx context.Context, name string) error {
	cn, err := c.openProcOp(ctx, wire.OpSessionRemove, wire.SessionRef{Name: name})
	if err == nil {
		defer cn.close()
		err = ctxErr(ctx, cn.readReply(wire.FrameOK, nil))
	}
	if err != nil {
		return fmt.Errorf("%s %q: %w", wire.OpSessionRemove, name, classifyProcErr(err))
	}
	return nil
}

// SessionExec runs one command in a session's shell, streaming its output
// to stdout and stderr (either may be nil). Cancelling ctx stops the
// command as its timeout would.
func (c *Client) SessionExec(ctx context.Context, cmd wire.SessionCommand, stdout, stderr io.Writer) (wire.SessionResult, error) {
	op := fmt.Sprintf("%s %q", wire.OpSessionExec, cmd.Name)
	cn, err := c.openProcOp(ctx, wire.OpSessionExec, cmd)
	if err != nil {
		return wire.SessionResult{}, fmt.Errorf("%s: %w", op, err)
	}
	defer cn.close()
	limit := cmd.OutputLimit
	if limit == 0 {
		limit = wire.DefaultOutputLimit
	}
	p := &ProcessStream{cn: cn, ctx: ctx, op: op, limit: limit}
	for {
		f, err := cn.fr.ReadFrame()
		if err == io.EOF {
			err = fmt.Errorf("%w: connection closed without a result", wire.ErrProtocol)
		}
		if err != nil {
			return wire.SessionResult{}, fmt.Errorf("%s: %w", op, ctxErr(ctx, err))
		}
		switch f.Type {
		case wire.FrameStdout, wire.FrameStderr:
			p.got += int64(len(f.Payload))
			if p.got > limit+startFailureSlack {
				return wire.SessionResult{}, fmt.Errorf("%s: %w: more output than the %d byte limit", op, wire.ErrProtocol, limit)
			}
			w := stdout
			if f.Type == wire.FrameStderr {
				w = stderr
			}
			if w != nil {
				if _, err := w.Write(f.Payload); err != nil {
					return wire.SessionResult{}, fmt.Errorf("%s: write %s: %w", op, f.Type, err)
				}
			}
		case wire.FrameResult, wire.FrameError:
			if len(f.Payload) > MaxControlPayload {
				return wire.SessionResult{}, fmt.Errorf("%s: %w: %s frame of %d bytes", op, wire.ErrProtocol, f.Type, len(f.Payload))
			}
			if f.Type == wire.FrameError {
				return wire.SessionResult{}, fmt.Errorf("%s: %w", op, classifyProcErr(wire.DecodeRemoteError(f.Payload)))
			}
			var res wire.SessionResult
			if err := json.Unmarshal(f.Payload, &res); err != nil {
				return wire.SessionResult{}, fmt.Errorf("%s: %w: malformed result: %v", op, wire.ErrProtocol, err)
			}
			return res, nil
		default:
			return wire.SessionResult{}, fmt.Errorf("%s: %w", op, wire.UnexpectedFrame(f.Type))
		}
	}
}
