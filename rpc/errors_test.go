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
