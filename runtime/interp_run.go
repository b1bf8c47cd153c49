//go:build linux

// Room: interp. RunCode and the context calls.

package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/boxd-dev/boxd/agent/wire"
)

// CodeStream receives a run's stdout and stderr as they come.
type CodeStream func(stream string, b []byte) error

// RunCode runs code in a context of the caller's sandbox (made on first
// use) and returns its result; out sees its stdout and stderr meanwhile.
// Ending ctx interrupts the cell.
func (m *Manager) RunCode(ctx context.Context, idOrName string, req RunCodeRequest, out CodeStream) (*CodeResult, error) {
	if err := checkRunCode(&req); err != nil {
		return nil, err
	}
	start := time.Now()
	d, id, release, err := m.acquireInterp(ctx, idOrName)
	if err != nil {
		return nil, err
	}
	defer release()
	defs := m.execDefaults(ctx, id)
	if req.Timeout == 0 {
		req.Timeout = defs.ExecTimeout
	}
	limit := req.OutputLimit
	if limit == 0 {
		limit = defs.OutputLimit
	}
	if limit == 0 {
		limit = wire.DefaultOutputLimit
	}
	rid, err := d.request(map[string]any{"op": "run", "context": req.Context, "code": req.Code,
		"timeout": req.Timeout.Seconds(), "limit": limit})
	if err != nil {
		return nil, m.procErr(ctx, id, "run code", err)
	}
	r := &codeRun{res: &CodeResult{Context: req.Context}, out: out, left: limit, rich: maxResultRich}
	var deadline time.Time
	if req.Timeout > 0 {
		deadline = time.Now().Add(req.Timeout + runSlack)
	}
	// The caller going away interrupts the cell; the driver answers
	// within runSlack.
	stop := context.AfterFunc(ctx, func() {
		_ = d.send(map[string]any{"op": "cancel", "run": rid})
	})
	defer stop()
	if err := d.await(ctx, rid, deadline, r.handle); err != nil {
		return nil, driverErr(m, ctx, id, "run code", err)
	}
	r.res.Duration = time.Since(start)
	return r.res, nil
}

// codeRun is one run's result as it is put together, and its budgets:
// left for all output (the output limit), rich for what goes into the
// result message.
type codeRun struct {
	res  *CodeResult
	out  CodeStream
	left int64
	rich int64
	err  error
}

func (r *codeRun) handle(msg driverMsg) (bool, error) {
	switch msg.T {
	case "out":
		if msg.S != "stdout" && msg.S != "stderr" {
			return false, fmt.Errorf("interpreter driver: %w: stream %.20q", wire.ErrProtocol, msg.S)
		}
		b := msg.B
		if int64(len(b)) > r.left {
			b = b[:r.left]
			r.res.Truncated = true
		}
		r.left -= int64(len(b))
		if len(b) > 0 && r.err == nil && r.out != nil {
			// A caller gone: keep reading to the end of the run.
			r.err = r.out(msg.S, []byte(b))
		}
	case "display", "value":
		return false, r.bundle(msg)
	case "error":
		r.charge(&msg)
		r.res.Error = &CodeError{Name: msg.Name, Value: msg.Value, Traceback: msg.Traceback}
	case "done":
		r.res.TimedOut, r.res.Interrupted, r.res.Restarted = msg.TimedOut, msg.Interrupted, msg.Restarted
		r.res.Truncated = r.res.Truncated || msg.Truncated
		r.res.Count = msg.Count
		return true, nil
	case "fail":
		return true, errReply{replyErr(msg, "run code")}
	default:
		return false, fmt.Errorf("interpreter driver: %w: unexpected %.20q frame", wire.ErrProtocol, msg.T)
	}
	return false, nil
}

// bundle adds a display or the value, within both budgets.
func (r *codeRun) bundle(msg driverMsg) error {
	budget := min(r.left, r.rich)
	before := budget
	b, truncated, err := decodeBundle(msg.Data, &budget)
	if err != nil {
		return err
	}
	r.left -= before - budget
	r.rich -= before - budget
	r.res.Truncated = r.res.Truncated || truncated
	if len(b) == 0 {
		return nil
	}
	if msg.T == "value" {
		r.res.Value = b
	} else if len(r.res.Displays) < maxDisplays {
		r.res.Displays = append(r.res.Displays, b)
	} else {
		r.res.Truncated = true
	}
	return nil
}

// charge fits an error's text into the budgets: the traceback goes first.
func (r *codeRun) charge(msg *driverMsg) {
	n := int64(len(msg.Name) + len(msg.Value))
	for _, l := range msg.Traceback {
		n += int64(len(l))
	}
	if n <= min(r.left, r.rich) {
		r.left -= n
		r.rich -= n
		return
	}
	r.res.Truncated = true
	msg.Traceback = nil
	if len(msg.Name) > 256 {
		msg.Name = msg.Name[:256]
	}
	if len(msg.Value) > 4096 {
		msg.Value = msg.Value[:4096]
	}
}

// ListCodeContexts lists the contexts of the caller's sandbox.
func (m *Manager) ListCodeContexts(ctx context.Context, idOrName string) ([]CodeContextInfo, error) {
	var out []CodeContextInfo
	err := m.contextCall(ctx, idOrName, map[string]any{"op": "list", "context": "default"}, func(msg driverMsg) error {
		if msg.T != "contexts" || len(msg.Contexts) > 64 {
			return fmt.Errorf("interpreter driver: %w: bad context list", wire.ErrProtocol)
		}
		for _, c := range msg.Contexts {
			if !codeContextRe.MatchString(c.Name) {
				return fmt.Errorf("interpreter driver: %w: bad context name", wire.ErrProtocol)
			}
			out = append(out, CodeContextInfo{Name: c.Name, Language: "python", Count: c.Count})
		}
		return nil
	})
	return out, err
}

// RestartCodeContext starts a context's kernel afresh.
func (m *Manager) RestartCodeContext(ctx context.Context, idOrName, name string) error {
	return m.contextOp(ctx, idOrName, "restart", name)
}

// DeleteCodeContext stops a context's kernel and forgets it.
func (m *Manager) DeleteCodeContext(ctx context.Context, idOrName, name string) error {
	return m.contextOp(ctx, idOrName, "delete", name)
}

func (m *Manager) contextOp(ctx context.Context, idOrName, op, name string) error {
	if name == "" {
		return fieldErr("context", "empty")
	}
	name, err := checkContextName(name)
	if err != nil {
		return err
	}
	return m.contextCall(ctx, idOrName, map[string]any{"op": op, "context": name}, func(msg driverMsg) error {
		if msg.T != "ok" {
			return fmt.Errorf("interpreter driver: %w: unexpected %.20q frame", wire.ErrProtocol, msg.T)
		}
		return nil
	})
}

// contextCall sends one request whose reply is a single frame.
func (m *Manager) contextCall(ctx context.Context, idOrName string, req map[string]any, reply func(driverMsg) error) error {
	d, id, release, err := m.acquireInterp(ctx, idOrName)
	if err != nil {
		return err
	}
	defer release()
	rid, err := d.request(req)
	if err != nil {
		return m.procErr(ctx, id, "code context", err)
	}
	what := fmt.Sprintf("code context %s in sandbox %s", req["context"], id)
	err = d.await(ctx, rid, time.Now().Add(runSlack), func(msg driverMsg) (bool, error) {
		if msg.T == "fail" {
			return true, errReply{replyErr(msg, what)}
		}
		return true, reply(msg)
	})
	return driverErr(m, ctx, id, "code context", err)
}

// driverErr is the driver's own answer as it is, and anything else (the
// channel, a broken driver) with the sandbox named.
func driverErr(m *Manager, ctx context.Context, id, what string, err error) error {
	var reply errReply
	if err == nil || errors.As(err, &reply) {
		return err
	}
	return m.procErr(ctx, id, what, err)
}

// errReply is the driver's answer, not a broken driver: it stays up.
type errReply struct{ error }

func (e errReply) Unwrap() error { return e.error }
