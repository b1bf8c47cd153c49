package boxd

import (
	"context"
	"io"
	"time"

	"connectrpc.com/connect"

	"github.com/boxd-dev/boxd/rpc/apiwire"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// Code is one RunCode call: Python code for the sandbox's interpreter (an
// IPython kernel per context, whose variables and imports persist between
// calls). The image needs python3, python3-ipykernel and
// python3-jupyter-client (boxd's Debian image has them, with matplotlib).
type Code struct {
	Code        string
	Context     string        // empty: "default"
	Timeout     time.Duration // zero: the sandbox's exec timeout; then the cell is interrupted
	OutputLimit int64         // zero: the sandbox's default
}

// CodeResult is how a run ended: the last expression's value and every
// display output as MIME bundles (type -> content; image/png decoded), and
// the exception it raised, if any (Error). See boxdv1.CodeResult for the
// flags (TimedOut, Interrupted, Restarted, Truncated).
type CodeResult = boxdv1.CodeResult

// RunCode runs code and writes its stdout and stderr to stdout and stderr
// (either may be nil: discarded) as they come, then returns the result.
func (s *Sandbox) RunCode(ctx context.Context, code Code, stdout, stderr io.Writer) (*CodeResult, error) {
	req := &boxdv1.RunCodeRequest{SandboxId: s.ID, Code: code.Code, Context: code.Context, OutputLimit: code.OutputLimit}
	if code.Timeout > 0 {
		req.Timeout = code.Timeout.String()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := s.c.api.Code.RunCode(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, wrap(err)
	}
	defer st.Close()
	var res *CodeResult
	for st.Receive() {
		var w io.Writer
		var data []byte
		switch ev := st.Msg().GetEvent().(type) {
		case *boxdv1.RunCodeResponse_Stdout:
			w, data = stdout, ev.Stdout
		case *boxdv1.RunCodeResponse_Stderr:
			w, data = stderr, ev.Stderr
		case *boxdv1.RunCodeResponse_Result:
			res = ev.Result
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
