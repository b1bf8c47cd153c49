package rpc

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"connectrpc.com/connect"
	"github.com/containerd/errdefs"
)

func TestCodeOf(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want connect.Code
	}{
		{fmt.Errorf("sandbox x: %w", errdefs.ErrNotFound), connect.CodeNotFound},
		{fmt.Errorf("limits.memory: %w", errdefs.ErrInvalidArgument), connect.CodeInvalidArgument},
		{fmt.Errorf("name: %w", errdefs.ErrAlreadyExists), connect.CodeAlreadyExists},
		{fmt.Errorf("stopped: %w", errdefs.ErrFailedPrecondition), connect.CodeFailedPrecondition},
		{fmt.Errorf("full: %w", errdefs.ErrResourceExhausted), connect.CodeResourceExhausted},
		{fmt.Errorf("slow: %w", context.DeadlineExceeded), connect.CodeDeadlineExceeded},
		{errors.New("boom"), connect.CodeInternal},
	} {
		if got := CodeOf(tc.err); got != tc.want {
			t.Errorf("CodeOf(%v) = %v, want %v", tc.err, got, tc.want)
		}
		if got := connect.CodeOf(ToConnect(tc.err)); got != tc.want {
			t.Errorf("ToConnect(%v) code = %v, want %v", tc.err, got, tc.want)
		}
	}
	if ToConnect(nil) != nil {
		t.Error("ToConnect(nil) != nil")
	}
}

// TestToConnectSaysTheClassOnce: a message does not end by repeating its
// code's words (the errdefs error wrapped last), whatever the depth of the
// wrapping; the Go chain still holds the class.
func TestToConnectSaysTheClassOnce(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code connect.Code
		msg  string
	}{
		{fmt.Errorf("sandbox %q not found: %w", "nope", errdefs.ErrNotFound), connect.CodeNotFound, `sandbox "nope" not found`},
		{fmt.Errorf("import: %w", fmt.Errorf("image %q already exists (import with --force to replace it): %w", "x", errdefs.ErrAlreadyExists)),
			connect.CodeAlreadyExists, `import: image "x" already exists (import with --force to replace it)`},
		{fmt.Errorf("limits.cpus: must be > 0: %w", errdefs.ErrInvalidArgument), connect.CodeInvalidArgument, "limits.cpus: must be > 0"},
		{fmt.Errorf("sandbox is stopped: %w", errdefs.ErrFailedPrecondition), connect.CodeFailedPrecondition, "sandbox is stopped"},
		{fmt.Errorf("busy: %w", errdefs.ErrConflict), connect.CodeFailedPrecondition, "busy"},
		{fmt.Errorf("pids limit reached: %w", errdefs.ErrResourceExhausted), connect.CodeResourceExhausted, "pids limit reached"},
		{fmt.Errorf("write /proc/sys/x: %w", errdefs.ErrPermissionDenied), connect.CodePermissionDenied, "write /proc/sys/x"},
		{fmt.Errorf("gone: %w", errdefs.ErrUnavailable), connect.CodeUnavailable, "gone"},
		{fmt.Errorf("no: %w", errdefs.ErrNotImplemented), connect.CodeUnimplemented, "no"},
		{fmt.Errorf("who: %w", errdefs.ErrUnauthenticated), connect.CodeUnauthenticated, "who"},
		// The class's words elsewhere, or alone, or another class's: kept.
		{errdefs.ErrNotFound, connect.CodeNotFound, "not found"},
		{fmt.Errorf("x: %w: detail", errdefs.ErrNotFound), connect.CodeNotFound, "x: not found: detail"},
		{fmt.Errorf("slow: %w", context.DeadlineExceeded), connect.CodeDeadlineExceeded, "slow: context deadline exceeded"},
		{errors.New("lookup: not found"), connect.CodeInternal, "lookup: not found"},
	} {
		err := ToConnect(tc.err)
		var ce *connect.Error
		if !errors.As(err, &ce) || ce.Code() != tc.code || ce.Message() != tc.msg {
			t.Errorf("ToConnect(%q) = %v, want %v: %s", tc.err, err, tc.code, tc.msg)
			continue
		}
		if !errors.Is(err, tc.err) {
			t.Errorf("ToConnect(%q) lost the chain", tc.err)
		}
	}
}
