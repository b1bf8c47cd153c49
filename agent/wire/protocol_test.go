package wire

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"testing"

	"github.com/containerd/errdefs"
)

// ToRemoteError classifies what goes wrong in the init for the wire, and the
// host side turns the code back into the errdefs class boxd's API maps.
func TestRemoteErrorClass(t *testing.T) {
	pathErr := func(errno syscall.Errno) error {
		return fmt.Errorf("copy-in: %w", &os.PathError{Op: "write", Path: "f", Err: errno})
	}
	for _, tc := range []struct {
		name  string
		err   error
		code  string
		class error
	}{
		{"missing", pathErr(syscall.ENOENT), CodeNotFound, errdefs.ErrNotFound},
		{"denied", pathErr(syscall.EACCES), CodePermissionDenied, errdefs.ErrPermissionDenied},
		{"exists", fmt.Errorf("x: %w", fs.ErrExist), CodeAlreadyExists, errdefs.ErrAlreadyExists},
		{"invalid", fmt.Errorf("%w: bad", ErrInvalid), CodeInvalidArgument, errdefs.ErrInvalidArgument},
		{"disk full", pathErr(syscall.ENOSPC), CodeResourceExhausted, errdefs.ErrResourceExhausted},
		{"quota", pathErr(syscall.EDQUOT), CodeResourceExhausted, errdefs.ErrResourceExhausted},
		{"file size limit", pathErr(syscall.EFBIG), CodeResourceExhausted, errdefs.ErrResourceExhausted},
		{"out of descriptors", pathErr(syscall.EMFILE), CodeResourceExhausted, errdefs.ErrResourceExhausted},
		{"out of pids", fmt.Errorf("cannot start a process: the sandbox is at its pids limit (limits.pids): %w", syscall.EAGAIN), CodeResourceExhausted, errdefs.ErrResourceExhausted},
		{"through a file", pathErr(syscall.ENOTDIR), CodeFailedPrecondition, errdefs.ErrFailedPrecondition},
		{"a directory", pathErr(syscall.EISDIR), CodeFailedPrecondition, errdefs.ErrFailedPrecondition},
		{"symlink loop", pathErr(syscall.ELOOP), CodeInvalidArgument, errdefs.ErrInvalidArgument},
		{"name too long", pathErr(syscall.ENAMETOOLONG), CodeInvalidArgument, errdefs.ErrInvalidArgument},
		{"other errno", pathErr(syscall.EIO), CodeInternal, errdefs.ErrInternal},
		{"plain", errors.New("boom"), CodeInternal, errdefs.ErrInternal},
		{"already classified", &RemoteError{Code: CodeFailedPrecondition, Message: "m"}, CodeFailedPrecondition, errdefs.ErrFailedPrecondition},
	} {
		re := ToRemoteError(tc.err)
		if re.Code != tc.code || re.Message != tc.err.Error() {
			t.Errorf("%s: ToRemoteError = %q %q, want %q %q", tc.name, re.Code, re.Message, tc.code, tc.err.Error())
		}
		if !errors.Is(re, tc.class) {
			t.Errorf("%s: %q does not unwrap to %v", tc.name, re.Code, tc.class)
		}
	}
}
