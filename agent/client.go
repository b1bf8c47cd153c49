package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
)

// MaxControlPayload bounds the JSON frames the client accepts from the init
// (results, errors, stat): a real one is a few hundred bytes.
const MaxControlPayload = 64 << 10

// maxInlineStdin is the most stdin sent inside the request frame; more is
// streamed so the request stays far below MaxFramePayload.
const maxInlineStdin = 64 << 10

// Client talks to one sandbox's init. It holds no connection: every call
// dials the socket, so a Client is cheap and safe for concurrent use.
type Client struct {
	socketPath string
	dialer     net.Dialer
}

// NewClient returns a client for the init listening at socketPath. boxd
// passes the agent socket it made itself in a directory only host root can
// reach and handed to the verified init (agent/handoff): a path the sandbox
// can change must never be dialled.
func NewClient(socketPath string) *Client {
	return &Client{socketPath: socketPath}
}

// conn is one operation's connection. Cancelling the context closes it,
// which unblocks any read or write and tells the init to give up.
type conn struct {
	c    net.Conn
	fr   *FrameReader
	fw   *FrameWriter
	stop func() bool
}

func (c *Client) open(ctx context.Context, req Request) (*conn, error) {
	nc, err := c.dialer.DialContext(ctx, "unix", c.socketPath)
	if err != nil {
		return nil, err
	}
	cn := &conn{c: nc, fr: NewFrameReader(nc), fw: NewFrameWriter(nc)}
	cn.stop = context.AfterFunc(ctx, func() { nc.Close() })
	if err := cn.fw.WriteJSON(FrameRequest, req); err != nil {
		cn.close()
		return nil, ctxErr(ctx, err)
	}
	return cn, nil
}

func (cn *conn) close() {
	cn.stop()
	cn.c.Close()
}

// ctxErr prefers the context's error: after a cancel, the "use of closed
// connection" the I/O reports is only a symptom.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// readReply reads the single frame that ends a simple operation: want
// (decoded into v if v is not nil) or an error frame.
func (cn *conn) readReply(want FrameType, v any) error {
	f, err := cn.fr.ReadFrame()
	if err == io.EOF {
		return fmt.Errorf("%w: connection closed without a reply", ErrProtocol)
	}
	if err != nil {
		return err
	}
	if len(f.Payload) > MaxControlPayload && (f.Type == want || f.Type == FrameError) {
		return fmt.Errorf("%w: %s frame of %d bytes", ErrProtocol, f.Type, len(f.Payload))
	}
	switch f.Type {
	case want:
		if v == nil {
			return nil
		}
		if err := json.Unmarshal(f.Payload, v); err != nil {
			return fmt.Errorf("%w: malformed %s frame: %v", ErrProtocol, f.Type, err)
		}
		return nil
	case FrameError:
		return DecodeRemoteError(f.Payload)
	}
	return UnexpectedFrame(f.Type)
}

// Ping succeeds once the init is up and serving.
func (c *Client) Ping(ctx context.Context) error {
	cn, err := c.open(ctx, Request{Op: OpPing})
	if err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	defer cn.close()
	if err := cn.readReply(FrameOK, nil); err != nil {
		return fmt.Errorf("ping: %w", ctxErr(ctx, err))
	}
	return nil
}

// Stat describes path inside the sandbox without following a final symlink.
func (c *Client) Stat(ctx context.Context, path string) (FileInfo, error) {
	var fi FileInfo
	cn, err := c.open(ctx, Request{Op: OpStat, Path: path})
	if err != nil {
		return fi, fmt.Errorf("stat %q: %w", path, err)
	}
	defer cn.close()
	if err := cn.readReply(FrameResult, &fi); err != nil {
		return FileInfo{}, fmt.Errorf("stat %q: %w", path, ctxErr(ctx, err))
	}
	return fi, nil
}

// CopyIn extracts tarStream into the sandbox with docker cp semantics: into
// dest if it is a directory, else as dest (the single top-level entry of the
// tar renamed to base(dest)) in dest's parent, which must exist.
func (c *Client) CopyIn(ctx context.Context, dest string, tarStream io.Reader) error {
	cn, err := c.open(ctx, Request{Op: OpCopyIn, Path: dest})
	if err != nil {
		return fmt.Errorf("copy-in %q: %w", dest, err)
	}
	defer cn.close()
	SetFileSocketBuffer(cn.c)
	werr := sendChunks(cn.fw, FrameTar, tarStream)
	if werr == nil {
		werr = cn.fw.WriteFrame(FrameTarEnd, nil)
	}
	var src *sourceError
	if errors.As(werr, &src) {
		// Our tar source failed: do not let the init finish a partial copy.
		return fmt.Errorf("copy-in %q: %w", dest, werr)
	}
	// On a write error the init has usually rejected the tar and said why
	// before closing: its reply is the better error.
	if err := cn.readReply(FrameOK, nil); err != nil {
		return fmt.Errorf("copy-in %q: %w", dest, ctxErr(ctx, err))
	}
	if werr != nil {
		return fmt.Errorf("copy-in %q: %w", dest, ctxErr(ctx, werr))
	}
	return nil
}

// CopyOut writes a tar of path inside the sandbox to w; its single
// top-level entry is named after base(path). Symlinks are archived as
// symlinks. The tar comes from the sandbox: extract it with safetar.
func (c *Client) CopyOut(ctx context.Context, path string, w io.Writer) error {
	cn, err := c.open(ctx, Request{Op: OpCopyOut, Path: path})
	if err != nil {
		return fmt.Errorf("copy-out %q: %w", path, err)
	}
	defer cn.close()
	r := NewFrameDataReader(cn.fr, FrameTar, FrameTarEnd, true)
	if _, err := io.Copy(w, r); err != nil {
		return fmt.Errorf("copy-out %q: %w", path, ctxErr(ctx, err))
	}
	return nil
}

// sourceError marks a failure reading the caller's input, as opposed to
// writing to the init.
type sourceError struct{ err error }

func (e *sourceError) Error() string { return "reading input: " + e.err.Error() }
func (e *sourceError) Unwrap() error { return e.err }

// sendChunks sends r as frames of type t of up to FileChunk bytes, and no
// end frame: the pieces of a ChunkSource as they are, other readers in full
// chunks through a pooled buffer (also from a reader that trickles). Few,
// big frames are what makes a large copy fast. A failure of r is a
// *sourceError.
func sendChunks(fw *FrameWriter, t FrameType, r io.Reader) error {
	if cs, ok := r.(ChunkSource); ok {
		for {
			b, err := cs.NextChunk()
			for len(b) > 0 {
				n := min(len(b), FileChunk)
				if werr := fw.WriteFrame(t, b[:n]); werr != nil {
					return werr
				}
				b = b[n:]
			}
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return &sourceError{err}
			}
		}
	}
	buf := fileSendBufs.Get().(*[FileChunk]byte)
	defer fileSendBufs.Put(buf)
	for {
		n, err := io.ReadFull(r, buf[:])
		if n > 0 {
			if werr := fw.WriteFrame(t, buf[:n]); werr != nil {
				return werr
			}
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil
		}
		if err != nil {
			return &sourceError{err}
		}
	}
}

// copyFrames sends r as frames of type t until EOF.
func copyFrames(fw *FrameWriter, t FrameType, r io.Reader) error {
	buf := make([]byte, DataChunk)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if werr := fw.WriteFrame(t, buf[:n]); werr != nil {
				return werr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return &sourceError{err}
		}
	}
}

// Exec runs req in the sandbox, streaming its output to stdout and stderr
// (either may be nil to discard). If stdin is not nil it is streamed to the
// command, then closed. The returned error is about running the command, not
// its exit status, which is in the result. Cancelling ctx closes the
// connection and the init kills the command's process tree.
//
// Exec does not wait for a stdin Read that is still blocked when the command
// finishes; that Read's data is dropped.
func (c *Client) Exec(ctx context.Context, req ExecRequest, stdin io.Reader, stdout, stderr io.Writer) (ExecResult, error) {
	name := ""
	if len(req.Args) > 0 {
		name = req.Args[0]
	}
	if len(req.Stdin) > maxInlineStdin {
		inline := bytes.NewReader(req.Stdin)
		if stdin == nil {
			stdin = inline
		} else {
			stdin = io.MultiReader(inline, stdin)
		}
		req.Stdin = nil
	}
	req.StdinStream = stdin != nil
	cn, err := c.open(ctx, Request{Op: OpExec, Exec: &req})
	if err != nil {
		return ExecResult{}, fmt.Errorf("exec %q: %w", name, err)
	}
	defer cn.close()

	stdinErr := make(chan error, 1)
	if stdin != nil {
		go func() {
			err := copyFrames(cn.fw, FrameStdin, stdin)
			if err == nil {
				err = cn.fw.WriteFrame(FrameStdinClose, nil)
			}
			var src *sourceError
			if errors.As(err, &src) {
				// Better to fail the exec than run it on partial input.
				stdinErr <- err
				cn.c.Close()
			}
			// Other errors are the connection going away; the reader
			// reports those.
		}()
	}

	res, err := cn.readExec(req.OutputLimit, stdout, stderr)
	if err != nil {
		select {
		case serr := <-stdinErr:
			err = fmt.Errorf("stdin: %w", serr)
		default:
			err = ctxErr(ctx, err)
		}
		return ExecResult{}, fmt.Errorf("exec %q: %w", name, err)
	}
	return res, nil
}

// readExec consumes an exec's output frames up to its result.
func (cn *conn) readExec(limit int64, stdout, stderr io.Writer) (ExecResult, error) {
	if limit == 0 {
		limit = DefaultOutputLimit
	}
	var got int64
	for {
		f, err := cn.fr.ReadFrame()
		if err == io.EOF {
			return ExecResult{}, fmt.Errorf("%w: connection closed without a result", ErrProtocol)
		}
		if err != nil {
			return ExecResult{}, err
		}
		switch f.Type {
		case FrameStdout, FrameStderr:
			// The init enforces the limit; one that sends more is broken
			// or hostile, and the caller's memory is what is at stake.
			got += int64(len(f.Payload))
			if got > limit+startFailureSlack {
				return ExecResult{}, fmt.Errorf("%w: more output than the %d byte limit", ErrProtocol, limit)
			}
			w := stdout
			if f.Type == FrameStderr {
				w = stderr
			}
			if w != nil {
				if _, err := w.Write(f.Payload); err != nil {
					return ExecResult{}, fmt.Errorf("write %s: %w", f.Type, err)
				}
			}
		case FrameResult, FrameError:
			if len(f.Payload) > MaxControlPayload {
				return ExecResult{}, fmt.Errorf("%w: %s frame of %d bytes", ErrProtocol, f.Type, len(f.Payload))
			}
			if f.Type == FrameError {
				return ExecResult{}, DecodeRemoteError(f.Payload)
			}
			var res ExecResult
			if err := json.Unmarshal(f.Payload, &res); err != nil {
				return ExecResult{}, fmt.Errorf("%w: malformed result: %v", ErrProtocol, err)
			}
			return res, nil
		default:
			return ExecResult{}, UnexpectedFrame(f.Type)
		}
	}
}

// startFailureSlack covers the init's own "cannot exec" message, which is
// not counted against the limit.
const startFailureSlack = 4096
