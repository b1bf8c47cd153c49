package boxd

import (
	"errors"

	"connectrpc.com/connect"
)

// Errors a call can fail with, one per API code. Test for them with
// errors.Is; the error itself is an *Error carrying boxd's message:
//
//	if errors.Is(err, boxd.ErrNotFound) { ... }
var (
	ErrCanceled           = errors.New("canceled")
	ErrUnknown            = errors.New("unknown")
	ErrInvalidArgument    = errors.New("invalid_argument")
	ErrDeadlineExceeded   = errors.New("deadline_exceeded")
	ErrNotFound           = errors.New("not_found")
	ErrAlreadyExists      = errors.New("already_exists")
	ErrPermissionDenied   = errors.New("permission_denied")
	ErrResourceExhausted  = errors.New("resource_exhausted")
	ErrFailedPrecondition = errors.New("failed_precondition")
	ErrAborted            = errors.New("aborted")
	ErrOutOfRange         = errors.New("out_of_range")
	ErrUnimplemented      = errors.New("unimplemented")
	ErrInternal           = errors.New("internal")
	ErrUnavailable        = errors.New("unavailable")
	ErrDataLoss           = errors.New("data_loss")
	ErrUnauthenticated    = errors.New("unauthenticated")
)

var byCode = map[connect.Code]error{
	connect.CodeCanceled:           ErrCanceled,
	connect.CodeUnknown:            ErrUnknown,
	connect.CodeInvalidArgument:    ErrInvalidArgument,
	connect.CodeDeadlineExceeded:   ErrDeadlineExceeded,
	connect.CodeNotFound:           ErrNotFound,
	connect.CodeAlreadyExists:      ErrAlreadyExists,
	connect.CodePermissionDenied:   ErrPermissionDenied,
	connect.CodeResourceExhausted:  ErrResourceExhausted,
	connect.CodeFailedPrecondition: ErrFailedPrecondition,
	connect.CodeAborted:            ErrAborted,
	connect.CodeOutOfRange:         ErrOutOfRange,
	connect.CodeUnimplemented:      ErrUnimplemented,
	connect.CodeInternal:           ErrInternal,
	connect.CodeUnavailable:        ErrUnavailable,
	connect.CodeDataLoss:           ErrDataLoss,
	connect.CodeUnauthenticated:    ErrUnauthenticated,
}

// Error is a failed call: the API's code and boxd's message. It matches
// the Err* value of its code under errors.Is, and unwraps to the
// *connect.Error it came from (so connect.CodeOf works too, and
// errors.Is(err, context.Canceled) for a call its context ended).
type Error struct {
	Code    connect.Code // e.g. connect.CodeNotFound
	Message string       // boxd's message, e.g. "sandbox x not found"
	err     error
}

// Error reads as boxctl prints it: "not_found: sandbox x not found".
func (e *Error) Error() string {
	if e.Message == "" {
		return e.Code.String()
	}
	return e.Code.String() + ": " + e.Message
}

// Is reports whether target is the Err* value of e's code.
func (e *Error) Is(target error) bool { return byCode[e.Code] == target }

func (e *Error) Unwrap() error { return e.err }

// wrap turns what a generated client returned into an *Error (nil stays
// nil). Errors that are not connect's (none are expected) become unknown.
func wrap(err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return &Error{Code: ce.Code(), Message: ce.Message(), err: err}
	}
	return &Error{Code: connect.CodeUnknown, Message: err.Error(), err: err}
}

// newError is an error of this package's own making, with code c.
func newError(c connect.Code, msg string) error {
	return &Error{Code: c, Message: msg, err: connect.NewError(c, errors.New(msg))}
}
