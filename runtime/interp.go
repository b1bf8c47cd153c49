//go:build linux

// Room: interp. The code interpreter: RunCode and the contexts of a
// sandbox, over the driver of interp_driver.go. A request holds the
// sandbox's slot for its whole run (one run per sandbox at a time), and
// what the driver sends back is bounded and checked here: the output
// limit, the fixed MIME list, base64 decoded and sized.

package runtime

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/containerd/errdefs"

	"github.com/boxd-dev/boxd/agent/wire"
)

const (
	// MaxCodeBytes bounds the code of one RunCode.
	MaxCodeBytes = 1 << 20
	// maxResultRich bounds a result's value, displays and error together:
	// the result is one API message (at most 8 MiB).
	maxResultRich = 6 << 20
	// maxDisplays bounds the display outputs of one result.
	maxDisplays = 1024
	// driverHello bounds the driver's start (python3 and its imports).
	driverHello = 60 * time.Second
	// runSlack is how long past a run's timeout the driver may take to
	// interrupt the cell, restart a kernel that ignores it, and answer.
	runSlack = 90 * time.Second
)

var codeContextRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// CodeMIMETypes are the MIME types a result may carry, in this order.
var CodeMIMETypes = []string{"text/plain", "text/html", "image/png", "image/svg+xml", "application/json", "text/markdown"}

// RunCodeRequest is one RunCode call.
type RunCodeRequest struct {
	Code        string
	Language    string
	Context     string
	Timeout     time.Duration
	OutputLimit int64
}

// CodeOutput is a MIME bundle: type -> content (image/png decoded).
type CodeOutput map[string][]byte

// CodeError is an exception the code raised.
type CodeError struct {
	Name, Value string
	Traceback   []string
}

// CodeResult is how a run ended.
type CodeResult struct {
	Value                                       CodeOutput
	Displays                                    []CodeOutput
	Error                                       *CodeError
	Truncated, TimedOut, Interrupted, Restarted bool
	Count                                       int64
	Context                                     string
	Duration                                    time.Duration
}

// CodeContextInfo describes a context.
type CodeContextInfo struct {
	Name     string
	Language string
	Count    int64
}

// interpSlot is a sandbox's driver and the right to use it: a request
// takes the one token of sem for its whole exchange.
type interpSlot struct {
	sem chan struct{}
	d   *interpDriver
}

func (m *Manager) interpSlotFor(id string) *interpSlot {
	v, _ := m.interps.LoadOrStore(id, &interpSlot{sem: make(chan struct{}, 1)})
	return v.(*interpSlot)
}

// dropInterp forgets a deleted sandbox's driver (its init took it along).
func (m *Manager) dropInterp(id string) {
	if v, ok := m.interps.LoadAndDelete(id); ok {
		if d := v.(*interpSlot).d; d != nil {
			d.cancel()
		}
	}
}

func checkContextName(name string) (string, error) {
	if name == "" {
		return "default", nil
	}
	if !codeContextRe.MatchString(name) {
		return "", fieldErr("context", "%.80q: 1 to 64 of [A-Za-z0-9_.-], starting with a letter or digit", name)
	}
	return name, nil
}

func checkRunCode(req *RunCodeRequest) error {
	var err error
	if req.Context, err = checkContextName(req.Context); err != nil {
		return err
	}
	switch strings.ToLower(req.Language) {
	case "", "python", "python3":
	default:
		return fieldErr("language", "%.40q is not supported (python only)", req.Language)
	}
	if len(req.Code) > MaxCodeBytes {
		return fieldErr("code", "%d bytes, at most %d", len(req.Code), MaxCodeBytes)
	}
	if !utf8.ValidString(req.Code) {
		return fieldErr("code", "not valid UTF-8")
	}
	if req.Timeout < 0 {
		return fieldErr("timeout", "%s must not be negative", req.Timeout)
	}
	if req.OutputLimit < 0 || req.OutputLimit > MaxOutputLimit {
		return fieldErr("output_limit", "%d: 0 to %d", req.OutputLimit, int64(MaxOutputLimit))
	}
	return nil
}

// acquireInterp finds the caller's sandbox, takes its slot (waiting for a
// run in progress) and makes sure a driver runs. release gives the slot
// back.
func (m *Manager) acquireInterp(ctx context.Context, idOrName string) (d *interpDriver, id string, release func(), err error) {
	if idOrName == "" {
		return nil, "", nil, fieldErr("sandbox_id", "empty")
	}
	_, id, err = m.agentFor(ctx, idOrName)
	if err != nil {
		return nil, "", nil, err
	}
	slot := m.interpSlotFor(id)
	select {
	case slot.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, "", nil, ctx.Err()
	}
	release = func() { <-slot.sem }
	if slot.d == nil || !slot.d.alive() {
		slot.d = nil
		if slot.d, err = m.startDriver(ctx, id); err != nil {
			release()
			return nil, "", nil, err
		}
	}
	return slot.d, id, release, nil
}

// startDriver runs the driver in the sandbox (as its default user, in its
// workdir) and waits for its hello, which says whether the image has what
// the interpreter needs.
func (m *Manager) startDriver(ctx context.Context, id string) (*interpDriver, error) {
	spec := wire.ProcessSpec{ExecRequest: wire.ExecRequest{
		Args:        []string{"python3", "-I", "-c", interpDriverSource},
		StdinStream: true,
		Timeout:     MaxExecTimeout,
		OutputLimit: driverOutputLimit,
	}}
	// The driver outlives this call: its context keeps the caller (for
	// the lookups) but not the call's cancellation.
	dctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ps, err := m.ExecProcess(dctx, id, spec)
	if err != nil {
		cancel()
		return nil, err
	}
	d := newInterpDriver(dctx, cancel, ps)
	t := time.NewTimer(driverHello)
	defer t.Stop()
	select {
	case msg := <-d.msgs:
		if msg.T != "hello" {
			d.kill()
			return nil, fmt.Errorf("interpreter driver in sandbox %s: %w: %q frame before hello", id, wire.ErrProtocol, msg.T)
		}
		if len(msg.Missing) > 0 {
			d.kill()
			return nil, fmt.Errorf("sandbox %s: the code interpreter needs %s in the image (Debian packages; boxd's Debian image has them): %w",
				id, strings.Join(boundStrings(msg.Missing, 4, 40), ", "), errdefs.ErrFailedPrecondition)
		}
		return d, nil
	case <-d.done:
		if d.exit != nil && (d.exit.ExitCode == 126 || d.exit.ExitCode == 127) {
			return nil, fmt.Errorf("sandbox %s: the code interpreter needs python3, python3-ipykernel and python3-jupyter-client in the image; python3 is missing: %w",
				id, errdefs.ErrFailedPrecondition)
		}
		return nil, fmt.Errorf("sandbox %s: %w", id, d.err)
	case <-t.C:
		d.kill()
		return nil, fmt.Errorf("sandbox %s: the interpreter driver did not start within %s: %w", id, driverHello, errdefs.ErrUnavailable)
	}
}

// boundStrings keeps at most n strings of at most k bytes each: for error
// messages made of what the sandbox said.
func boundStrings(ss []string, n, k int) []string {
	out := make([]string, 0, n)
	for i, s := range ss {
		if i == n {
			break
		}
		if len(s) > k {
			s = s[:k]
		}
		out = append(out, fmt.Sprintf("%q", s))
	}
	return out
}

// request sends req under a new id, which await then follows. Requests
// go one at a time (the slot), so the ids only grow.
func (d *interpDriver) request(req map[string]any) (int64, error) {
	d.next++
	req["id"] = d.next
	return d.next, d.send(req)
}

// await reads the driver's frames for request id until handle says the
// exchange is over. The deadline (zero: none) bounds the driver: past
// it, it is killed. A handle error kills it too, unless it is the
// driver's own answer (errReply).
func (d *interpDriver) await(ctx context.Context, id int64, deadline time.Time, handle func(driverMsg) (bool, error)) error {
	var timer <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		timer = t.C
	}
	gone := ctx.Done()
	for {
		select {
		case <-gone:
			// The caller left: the driver has runSlack to wind the
			// request up.
			gone = nil
			t := time.NewTimer(runSlack)
			defer t.Stop()
			if deadline.IsZero() || time.Until(deadline) > runSlack {
				timer = t.C
			}
		case msg := <-d.msgs:
			if msg.ID < id {
				continue // a late frame of an abandoned request
			}
			if msg.ID > id {
				d.kill()
				return fmt.Errorf("interpreter driver: %w: reply to request %d, %d expected", wire.ErrProtocol, msg.ID, id)
			}
			end, err := handle(msg)
			var reply errReply
			if err != nil && !errors.As(err, &reply) {
				d.kill()
				return err
			}
			if err != nil {
				return reply
			}
			if end {
				return nil
			}
		case <-d.done:
			return d.err
		case <-timer:
			d.kill()
			return fmt.Errorf("interpreter driver did not answer in time: %w", errdefs.ErrUnavailable)
		}
	}
}

// replyErr turns a driver's fail frame into an error of the right class.
func replyErr(msg driverMsg, what string) error {
	text := msg.Msg
	if len(text) > 512 {
		text = text[:512]
	}
	switch msg.Code {
	case "not_found":
		return fmt.Errorf("%s: %s: %w", what, text, errdefs.ErrNotFound)
	case "limit":
		return fmt.Errorf("%s: %s: %w", what, text, errdefs.ErrResourceExhausted)
	}
	return fmt.Errorf("%s: the interpreter failed: %.512s", what, text)
}

// decodeBundle keeps the fixed MIME types of a bundle the driver sent,
// checked: image/png is base64 and decoded, application/json is JSON, the
// rest UTF-8 text. Each item is charged to budget; what does not fit is
// dropped (truncated).
func decodeBundle(data map[string]string, budget *int64) (out CodeOutput, truncated bool, err error) {
	out = CodeOutput{}
	for _, mime := range CodeMIMETypes {
		v, ok := data[mime]
		if !ok {
			continue
		}
		b := []byte(v)
		switch mime {
		case "image/png":
			b, err = base64.StdEncoding.DecodeString(strings.Map(dropSpace, v))
			if err != nil {
				return nil, false, fmt.Errorf("interpreter driver: %w: image/png is not base64", wire.ErrProtocol)
			}
		case "application/json":
			if !json.Valid(b) {
				return nil, false, fmt.Errorf("interpreter driver: %w: application/json is not JSON", wire.ErrProtocol)
			}
		}
		if int64(len(b)) > *budget {
			truncated = true
			continue
		}
		*budget -= int64(len(b))
		out[mime] = b
	}
	return out, truncated, nil
}

func dropSpace(r rune) rune {
	if r == '\n' || r == '\r' {
		return -1
	}
	return r
}
