package wire

// Wire protocol. Every frame is 1 type byte, a 4 byte big-endian payload
// length (at most MaxFramePayload) and the payload. A connection carries one
// operation; the host speaks first with a request frame (JSON Request):
//
//	ping:     -> request             <- ok
//	stat:     -> request{path}       <- result(FileInfo) | error
//	copy-in:  -> request{path} tar* tar-end
//	                                 <- ok | error (possibly before tar-end)
//	          -> request{args: UploadArgs} tar* tar-end
//	                                 <- result(FileResult)* (ok | error)
//	copy-out: -> request{path}       <- tar* (tar-end | error)
//	          -> request{args: DownloadArgs}
//	                                 <- tar* (tar-end | error)
//	exec:     -> request{exec} [stdin* stdin-close if exec.stdin_stream]
//	                                 <- (stdout | stderr)* (result | error)
//
// During an exec the host keeps the connection open until the result: if it
// closes it, the init kills the command's process tree. Error frames carry
// JSON {message, code}; see the Code constants.
//
// A ping, and an exec with no stdin, may ask to keep the connection
// (request.keep). If the init can, it says so in the op's last frame (the
// result's "kept", or an ok frame whose payload is KeptPayload) and then
// reads another request on the same connection instead of closing it,
// which spares a dial and an accept on the exec path. After an error
// frame, a result without "kept", or any other op, the connection ends. An
// idle kept connection is closed by the init after KeepIdle.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"syscall"
	"time"

	"github.com/containerd/errdefs"
)

// Operations named by the request frame. Each connection carries exactly one.
const (
	OpExec    = "exec"
	OpPing    = "ping"
	OpCopyIn  = "copy-in"
	OpCopyOut = "copy-out"
	OpStat    = "stat" // retired: a stat is file-stat's (see Retired)
)

// Ops names every operation, in every file of this package: the init's op
// table (agent/insandbox/ops.go) serves exactly these. A name never changes
// meaning: a boxd drives the inits of sandboxes an older boxd created.
var Ops = []string{
	OpPing, OpExec, OpCopyIn, OpCopyOut,
	OpProcessExec, OpProcessStart, OpProcessAttach, OpProcessList, OpProcessWait, OpProcessSignal,
	OpSessionCreate, OpSessionList, OpSessionRemove, OpSessionExec,
	OpFileWrite, OpFileRead, OpFileStat, OpFileList, OpFileMkdir, OpFileRemove, OpFileRename, OpFileChmod,
	OpFileChown, OpFileWatch, OpFileReadLines, OpFileEdit, OpFileGlob, OpFileGrep,
	OpSetDefaults, OpTerminate, OpDial,
	OpCheckpointPrepare, OpCheckpointResume,
}

// Retired names operations no init serves any more. A name is never given
// another meaning, so these stay reserved: an init answers them as unknown.
var Retired = []string{OpFileUpload, OpFileDownload, OpStat}

// Request is the JSON payload of the first frame of every connection.
type Request struct {
	Op   string       `json:"op"`
	Exec *ExecRequest `json:"exec,omitempty"` // for OpExec
	Path string       `json:"path,omitempty"` // copy-in destination, copy-out source; BatchPath for a batch
	// Args carries the parameters of the ops beyond the core five, each
	// decoding its own type.
	Args json.RawMessage `json:"args,omitempty"`
	// Keep asks the init to read another request on this connection once
	// the op has ended well (only ping and an exec without stdin honour
	// it; see Keepable).
	Keep bool `json:"keep,omitempty"`
}

// KeepIdle is how long the init keeps an idle kept connection open. The
// host reuses one only for a much shorter time, so the init does not
// close a connection under a request that is on its way.
const KeepIdle = 60 * time.Second

// KeptPayload is the payload of a ping's ok frame when the init keeps the
// connection.
var KeptPayload = []byte("kept")

// Keepable reports whether req is an op that may keep its connection.
func Keepable(req *Request) bool {
	switch req.Op {
	case OpPing:
		return true
	case OpExec:
		return req.Exec != nil && !req.Exec.StdinStream && len(req.Exec.Stdin) == 0
	}
	return false
}

// Error codes carried in error frames. The client maps them onto errdefs so
// callers can use errdefs.IsNotFound and friends.
const (
	CodeNotFound         = "not-found"
	CodeInvalidArgument  = "invalid-argument"
	CodePermissionDenied = "permission-denied"
	CodeAlreadyExists    = "already-exists"
	CodeInternal         = "internal"
)

// RemoteError is an error reported by the init in an error frame.
type RemoteError struct {
	Message string `json:"message"`
	Code    string `json:"code"`
}

func (e *RemoteError) Error() string { return e.Message }

// Unwrap lets errors.Is(err, errdefs.ErrNotFound) and errdefs.IsNotFound work
// on errors from the init.
func (e *RemoteError) Unwrap() error {
	switch e.Code {
	case CodeNotFound:
		return errdefs.ErrNotFound
	case CodeInvalidArgument:
		return errdefs.ErrInvalidArgument
	case CodePermissionDenied:
		return errdefs.ErrPermissionDenied
	case CodeAlreadyExists:
		return errdefs.ErrAlreadyExists
	case CodeFailedPrecondition:
		return errdefs.ErrFailedPrecondition
	case CodeResourceExhausted:
		return errdefs.ErrResourceExhausted
	case CodeInternal:
		return errdefs.ErrInternal
	}
	return errdefs.ErrUnknown
}

// ErrInvalid marks errors the server should report as invalid-argument.
var ErrInvalid = errors.New("invalid argument")

// ToRemoteError classifies err for the wire.
func ToRemoteError(err error) *RemoteError {
	var re *RemoteError
	if errors.As(err, &re) {
		return re
	}
	code := CodeInternal
	switch {
	case errors.Is(err, fs.ErrNotExist):
		code = CodeNotFound
	case errors.Is(err, ErrInvalid), errors.Is(err, errdefs.ErrInvalidArgument):
		code = CodeInvalidArgument
	case errors.Is(err, fs.ErrPermission):
		code = CodePermissionDenied
	case errors.Is(err, fs.ErrExist):
		code = CodeAlreadyExists
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT), errors.Is(err, syscall.EFBIG),
		errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE), errors.Is(err, syscall.ENOMEM),
		errors.Is(err, syscall.EAGAIN):
		// The sandbox's disk, quota, file size limit, memory or pids
		// (fork's EAGAIN): the caller can free some and retry, unlike an
		// internal error.
		code = CodeResourceExhausted
	case errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EISDIR):
		// A path through a file, or a directory where a file must be:
		// the caller's path, not the sandbox, is wrong.
		code = CodeFailedPrecondition
	case errors.Is(err, syscall.ELOOP), errors.Is(err, syscall.ENAMETOOLONG):
		code = CodeInvalidArgument
	}
	return &RemoteError{Message: err.Error(), Code: code}
}

// DecodeRemoteError parses an error frame; a malformed one is itself an error.
func DecodeRemoteError(payload []byte) error {
	var re RemoteError
	if err := json.Unmarshal(payload, &re); err != nil {
		return fmt.Errorf("malformed error frame: %w", err)
	}
	if re.Message == "" {
		re.Message = "init reported an error without a message"
	}
	return &re
}

// ErrProtocol marks a peer that broke the protocol.
var ErrProtocol = errors.New("agent protocol violation")

func UnexpectedFrame(t FrameType) error {
	return fmt.Errorf("%w: unexpected %s frame", ErrProtocol, t)
}

// FrameDataReader turns a run of data frames of one type, ended by an end
// frame, into an io.Reader. An error frame from the peer becomes the error.
type FrameDataReader struct {
	fr       *FrameReader
	data     FrameType
	end      FrameType
	pending  []byte
	err      error
	acceptEr bool // whether the peer may end the stream with an error frame
	// Idle, if set, runs before a read that may wait for the peer (no
	// whole frame header is buffered); its error ends the stream. The
	// init flushes its buffered replies there.
	Idle func() error
}

// NewFrameDataReader reads data frames from fr until an end frame;
// acceptErr says whether the peer may end the stream with an error frame.
func NewFrameDataReader(fr *FrameReader, data, end FrameType, acceptErr bool) *FrameDataReader {
	return &FrameDataReader{fr: fr, data: data, end: end, acceptEr: acceptErr}
}

func (r *FrameDataReader) Read(p []byte) (int, error) {
	for len(r.pending) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		r.next()
	}
	n := copy(p, r.pending)
	r.pending = r.pending[n:]
	return n, nil
}

// next reads one frame into pending or err.
func (r *FrameDataReader) next() {
	if r.Idle != nil && r.fr.Buffered() < FrameHeaderLen {
		if err := r.Idle(); err != nil {
			r.err = err
			return
		}
	}
	f, err := r.fr.ReadFrame()
	switch {
	case err == io.EOF:
		r.err = fmt.Errorf("%w: stream ended before %s frame", ErrProtocol, r.end)
	case err != nil:
		r.err = err
	case f.Type == r.data:
		r.pending = f.Payload
	case f.Type == r.end:
		r.err = io.EOF
	case f.Type == FrameError && r.acceptEr:
		r.err = DecodeRemoteError(f.Payload)
	default:
		r.err = UnexpectedFrame(f.Type)
	}
}

// WriteTo hands each frame's payload to w as it is, so io.Copy makes one
// write per frame rather than copying through its own 32 KiB buffer.
func (r *FrameDataReader) WriteTo(w io.Writer) (int64, error) {
	var n int64
	for {
		if len(r.pending) > 0 {
			m, err := w.Write(r.pending)
			n += int64(m)
			r.pending = r.pending[m:]
			if err != nil {
				return n, err
			}
		}
		if r.err == io.EOF {
			return n, nil
		}
		if r.err != nil {
			return n, r.err
		}
		r.next()
	}
}
