package rpc

import (
	"context"
	"errors"

	"connectrpc.com/connect"
	"github.com/containerd/errdefs"
)

// ToConnect is the one place internal errors become API codes. containerd's
// errdefs classes are the shared vocabulary: runtime/, snapshot/ and agent/
// wrap them, and containerd's own errors arrive already classified.
func ToConnect(err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return err
	}
	return connect.NewError(CodeOf(err), err)
}

// CodeOf classifies an error.
func CodeOf(err error) connect.Code {
	switch {
	case errdefs.IsNotFound(err):
		return connect.CodeNotFound
	case errdefs.IsInvalidArgument(err):
		return connect.CodeInvalidArgument
	case errdefs.IsAlreadyExists(err):
		return connect.CodeAlreadyExists
	case errdefs.IsFailedPrecondition(err), errdefs.IsConflict(err):
		return connect.CodeFailedPrecondition
	case errdefs.IsResourceExhausted(err):
		return connect.CodeResourceExhausted
	case errdefs.IsDeadlineExceeded(err), errors.Is(err, context.DeadlineExceeded):
		return connect.CodeDeadlineExceeded
	case errdefs.IsCanceled(err), errors.Is(err, context.Canceled):
		return connect.CodeCanceled
	case errdefs.IsUnavailable(err):
		return connect.CodeUnavailable
	case errdefs.IsNotImplemented(err):
		return connect.CodeUnimplemented
	case errdefs.IsPermissionDenied(err):
		return connect.CodePermissionDenied
	case errdefs.IsUnauthorized(err):
		return connect.CodeUnauthenticated
	}
	return connect.CodeInternal
}
