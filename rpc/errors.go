package rpc

import (
	"errors"
	"strings"

	"connectrpc.com/connect"
	"github.com/containerd/errdefs"
)

// ToConnect is the one place internal errors become API codes. containerd's
// errdefs classes are the shared vocabulary: runtime/, snapshot/ and agent/
// wrap them, and containerd's own errors arrive already classified.
//
// The message loses a trailing ": <class>" (": not found", the text of the
// errdefs error wrapped at the end of the chain): the code says it already,
// and the message often says it in its own words too ("sandbox "x" not
// found: not found"). The Go chain is kept, for errors.Is.
func ToConnect(err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return err
	}
	c := classify(err)
	if c.sentinel != nil {
		if msg, ok := strings.CutSuffix(err.Error(), ": "+c.sentinel.Error()); ok {
			err = &trimmed{msg, err}
		}
	}
	return connect.NewError(c.code, err)
}

// trimmed is err with another message.
type trimmed struct {
	msg string
	err error
}

func (t *trimmed) Error() string { return t.msg }
func (t *trimmed) Unwrap() error { return t.err }

// class is an errdefs class: its test, its API code and its sentinel, whose
// text ends the messages of errors wrapping it (nil: the class is the
// context package's errors, whose text is not a code's words alone).
type class struct {
	is       func(error) bool
	code     connect.Code
	sentinel error
}

var classes = []class{
	{errdefs.IsNotFound, connect.CodeNotFound, errdefs.ErrNotFound},
	{errdefs.IsInvalidArgument, connect.CodeInvalidArgument, errdefs.ErrInvalidArgument},
	{errdefs.IsAlreadyExists, connect.CodeAlreadyExists, errdefs.ErrAlreadyExists},
	{errdefs.IsFailedPrecondition, connect.CodeFailedPrecondition, errdefs.ErrFailedPrecondition},
	{errdefs.IsConflict, connect.CodeFailedPrecondition, errdefs.ErrConflict},
	{errdefs.IsResourceExhausted, connect.CodeResourceExhausted, errdefs.ErrResourceExhausted},
	{errdefs.IsDeadlineExceeded, connect.CodeDeadlineExceeded, nil}, // context.DeadlineExceeded too
	{errdefs.IsCanceled, connect.CodeCanceled, nil},                 // context.Canceled too
	{errdefs.IsUnavailable, connect.CodeUnavailable, errdefs.ErrUnavailable},
	{errdefs.IsNotImplemented, connect.CodeUnimplemented, errdefs.ErrNotImplemented},
	{errdefs.IsPermissionDenied, connect.CodePermissionDenied, errdefs.ErrPermissionDenied},
	{errdefs.IsUnauthorized, connect.CodeUnauthenticated, errdefs.ErrUnauthenticated},
}

// classify finds err's class, the first that matches; none is internal.
func classify(err error) class {
	for _, c := range classes {
		if c.is(err) {
			return c
		}
	}
	return class{code: connect.CodeInternal}
}

// CodeOf classifies an error.
func CodeOf(err error) connect.Code { return classify(err).code }
