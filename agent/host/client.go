// Package host is boxd's end of the channel to a sandbox's init: the
// Client that runs commands and moves files through the init. It runs on
// the host as root and treats everything the init says as hostile (the
// init runs as the sandbox's root, which the sandbox's code may have
// replaced or subverted): frames are size bounded, results are checked,
// and malformed input ends the operation with an error.
package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/boxd-dev/boxd/agent/wire"
)

// MaxControlPayload bounds the JSON frames the client accepts from the init
// (results, errors, stat): a real one is a few hundred bytes.
const MaxControlPayload = 64 << 10

// maxInlineStdin is the most stdin sent inside the request frame; more is
// streamed so the request stays far below MaxFramePayload.
const maxInlineStdin = 64 << 10

// Client talks to one sandbox's init. It holds no connection: every call
// dials the socket (or, with Pooled, reuses a kept one), so a Client is cheap
// and safe for concurrent use.
type Client struct {
	socketPath string
	dialer     net.Dialer
	// dialFn, if set, replaces dialling socketPath (NewDialClient).
	dialFn func(context.Context) (net.Conn, error)
	track  func() (release func())
	pool   *Pool
}

// NewClient returns a client for the init listening at socketPath. boxd
// passes the agent socket it made itself in a directory only host root can
// reach and handed to the verified init (agent/handoff): a path the sandbox
// can change must never be dialled.
func NewClient(socketPath string) *Client {
	return &Client{socketPath: socketPath}
}

// NewDialClient returns a client whose every connection comes from dial:
// for an init whose socket boxd must not dial by path (a gVisor sandbox's,
// agent/gvchannel).
func NewDialClient(dial func(context.Context) (net.Conn, error)) *Client {
	return &Client{dialFn: dial}
}

// dial opens one operation's connection.
func (c *Client) dial(ctx context.Context) (net.Conn, error) {
	if c.dialFn != nil {
		return c.dialFn(ctx)
	}
	return c.dialer.DialContext(ctx, "unix", c.socketPath)
}

// Tracked makes every operation's connection call track when it opens and
// the release track returns when it closes: boxd counts a sandbox in use
// while any call into its init is open (idle expiry).
func (c *Client) Tracked(track func() (release func())) *Client {
	c.track = track
	return c
}

// Pooled makes the ops that may keep their connection (wire.Keepable) take
// it from p and give it back: p belongs to this client's sandbox.
func (c *Client) Pooled(p *Pool) *Client {
	c.pool = p
	return c
}

// trackedConn releases its tracking once, on the first Close.
type trackedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (t *trackedConn) Close() error {
	t.once.Do(t.release)
	return t.Conn.Close()
}

// conn is one operation's connection. Cancelling the context closes it,
// which unblocks any read or write and tells the init to give up.
type conn struct {
	c    net.Conn
	fr   *wire.FrameReader
	fw   *wire.FrameWriter
	stop func() bool

	// For a kept connection (Pooled, a keepable op): pool takes it back
	// at close if the op set clean; release ends this op's tracking.
	pool      *Pool
	release   func()
	clean     bool
	closed    bool
	idleSince time.Time
}

func (c *Client) open(ctx context.Context, req wire.Request) (*conn, error) {
	if c.pool != nil && wire.Keepable(&req) {
		req.Keep = true
		for cn := c.pool.get(); cn != nil; cn = c.pool.get() {
			if err := cn.begin(ctx, c, req); err == nil {
				return cn, nil
			}
			cn.close() // its init went away; another or a fresh one
		}
	}
	nc, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	cn := &conn{c: nc, fr: wire.NewFrameReader(nc), fw: wire.NewFrameWriter(nc)}
	if req.Keep {
		cn.pool = c.pool
	} else if c.track != nil {
		cn.c = &trackedConn{Conn: nc, release: c.track()}
	}
	if err := cn.begin(ctx, c, req); err != nil {
		cn.close()
		return nil, ctxErr(ctx, err)
	}
	return cn, nil
}

// begin starts one op on cn: its cancellation, its tracking if kept, and
// the request.
func (cn *conn) begin(ctx context.Context, c *Client, req wire.Request) error {
	cn.clean, cn.closed = false, false
	if cn.pool != nil && c.track != nil {
		cn.release = c.track()
	}
	nc := cn.c
	cn.stop = context.AfterFunc(ctx, func() { nc.Close() })
	return cn.fw.WriteJSON(wire.FrameRequest, req)
}

// close ends the op: a kept connection whose op ended well (clean), whose
// context never fired and that holds nothing unread goes back to its pool;
// any other is closed.
func (cn *conn) close() {
	if cn.closed {
		return
	}
	cn.closed = true
	stopped := cn.stop()
	if cn.release != nil {
		cn.release()
		cn.release = nil
	}
	if cn.pool != nil && cn.clean && stopped && cn.fr.Buffered() == 0 && cn.pool.put(cn) {
		return
	}
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
// (decoded into v if v is not nil) or an error frame, each at most
// MaxControlPayload.
func (cn *conn) readReply(want wire.FrameType, v any) error {
	return cn.readReplyMax(want, v, MaxControlPayload)
}

// readReplyMax is readReply for a want frame of up to max bytes (an error
// frame is still at most MaxControlPayload). Every single-frame answer is
// read here.
func (cn *conn) readReplyMax(want wire.FrameType, v any, max int) error {
	f, err := cn.fr.ReadFrame()
	if err == io.EOF {
		return fmt.Errorf("%w: connection closed without a reply", wire.ErrProtocol)
	}
	if err != nil {
		return err
	}
	switch {
	case f.Type == want && len(f.Payload) <= max:
		if v == nil {
			return nil
		}
		if err := json.Unmarshal(f.Payload, v); err != nil {
			return fmt.Errorf("%w: malformed %s frame: %v", wire.ErrProtocol, f.Type, err)
		}
		return nil
	case f.Type == wire.FrameError && len(f.Payload) <= MaxControlPayload:
		return wire.DecodeRemoteError(f.Payload)
	case f.Type == want || f.Type == wire.FrameError:
		return fmt.Errorf("%w: %s frame of %d bytes", wire.ErrProtocol, f.Type, len(f.Payload))
	}
	return wire.UnexpectedFrame(f.Type)
}

// readResults reads an op's frames up to its ok frame: each result
// frame's payload goes to result, the ok frame's (at most
// MaxControlPayload) to ok if set. An error frame (bounded too), a closed
// connection or any other frame ends it with an error; what names the
// answer being read.
func (cn *conn) readResults(what string, result, ok func([]byte) error) error {
	for {
		f, err := cn.fr.ReadFrame()
		switch {
		case err == io.EOF:
			return fmt.Errorf("%w: connection closed before the end of the %s", wire.ErrProtocol, what)
		case err != nil:
			return err
		case f.Type == wire.FrameResult:
			if err := result(f.Payload); err != nil {
				return err
			}
		case f.Type == wire.FrameOK && len(f.Payload) <= MaxControlPayload:
			if ok == nil {
				return nil
			}
			return ok(f.Payload)
		case f.Type == wire.FrameError && len(f.Payload) <= MaxControlPayload:
			return wire.DecodeRemoteError(f.Payload)
		default:
			return wire.UnexpectedFrame(f.Type)
		}
	}
}

// handlerError carries a caller's callback's own error out of a read
// unchanged (not as the op's error).
type handlerError struct{ err error }

func (e *handlerError) Error() string { return e.err.Error() }

// handlerErr marks a callback's error, if any.
func handlerErr(err error) error {
	if err == nil {
		return nil
	}
	return &handlerError{err}
}

// unwrapHandler returns a callback's error as it was.
func unwrapHandler(err error) error {
	var he *handlerError
	if errors.As(err, &he) {
		return he.err
	}
	return err
}

// Ping succeeds once the init is up and serving.
func (c *Client) Ping(ctx context.Context) error {
	cn, err := c.open(ctx, wire.Request{Op: wire.OpPing})
	if err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	defer cn.close()
	f, err := cn.fr.ReadFrame()
	switch {
	case err == io.EOF:
		err = fmt.Errorf("%w: connection closed without a reply", wire.ErrProtocol)
	case err != nil:
	case f.Type == wire.FrameOK:
		cn.clean = bytes.Equal(f.Payload, wire.KeptPayload)
		return nil
	case f.Type == wire.FrameError && len(f.Payload) <= MaxControlPayload:
		err = wire.DecodeRemoteError(f.Payload)
	default:
		err = wire.UnexpectedFrame(f.Type)
	}
	return fmt.Errorf("ping: %w", ctxErr(ctx, err))
}

// CopyIn extracts tarStream into the sandbox with docker cp semantics: into
// dest if it is a directory, else as dest (the single top-level entry of the
// tar renamed to base(dest)) in dest's parent, which must exist.
func (c *Client) CopyIn(ctx context.Context, dest string, tarStream io.Reader) error {
	cn, err := c.open(ctx, wire.Request{Op: wire.OpCopyIn, Path: dest})
	if err != nil {
		return fmt.Errorf("copy-in %q: %w", dest, err)
	}
	defer cn.close()
	wire.SetFileSocketBuffer(cn.c)
	werr := sendChunks(cn.fw, wire.FrameTar, tarStream, nil)
	if werr == nil {
		werr = cn.fw.WriteFrame(wire.FrameTarEnd, nil)
	}
	var src *sourceError
	if errors.As(werr, &src) {
		// Our tar source failed: do not let the init finish a partial copy.
		return fmt.Errorf("copy-in %q: %w", dest, werr)
	}
	// On a write error the init has usually rejected the tar and said why
	// before closing: its reply is the better error.
	if err := cn.readReply(wire.FrameOK, nil); err != nil {
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
	cn, err := c.open(ctx, wire.Request{Op: wire.OpCopyOut, Path: path})
	if err != nil {
		return fmt.Errorf("copy-out %q: %w", path, err)
	}
	defer cn.close()
	r := wire.NewFrameDataReader(cn.fr, wire.FrameTar, wire.FrameTarEnd, true)
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
func sendChunks(fw *wire.FrameWriter, t wire.FrameType, r io.Reader, counted *atomic.Int64) error {
	return eachPiece(r, func(b []byte) error {
		for len(b) > 0 {
			n := min(len(b), wire.FileChunk)
			if counted != nil {
				counted.Add(int64(n))
			}
			if err := fw.WriteFrame(t, b[:n]); err != nil {
				return err
			}
			b = b[n:]
		}
		return nil
	})
}

// copyFrames sends r as frames of type t until EOF.
func copyFrames(fw *wire.FrameWriter, t wire.FrameType, r io.Reader) error {
	buf := make([]byte, wire.DataChunk)
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
func (c *Client) Exec(ctx context.Context, req wire.ExecRequest, stdin io.Reader, stdout, stderr io.Writer) (wire.ExecResult, error) {
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
	ps, err := c.ExecProcess(ctx, wire.ProcessSpec{ExecRequest: req}, false)
	if err != nil {
		return wire.ExecResult{}, err
	}
	defer ps.Close()
	stdinErr := make(chan error, 1)
	if stdin != nil {
		go func() {
			err := copyFrames(ps.cn.fw, wire.FrameStdin, stdin)
			if err == nil {
				err = ps.cn.fw.WriteFrame(wire.FrameStdinClose, nil)
			}
			var src *sourceError
			if errors.As(err, &src) {
				// Better to fail the exec than run it on partial input.
				stdinErr <- err
				ps.cn.c.Close()
			}
			// Other errors are the connection going away; the reader
			// reports those.
		}()
	}
	res, err := ps.Output(stdout, stderr)
	if err != nil {
		select {
		case serr := <-stdinErr:
			err = fmt.Errorf("%s: stdin: %w", ps.op, serr)
		default:
		}
		return wire.ExecResult{}, err
	}
	return res, nil
}

// startFailureSlack covers the init's own "cannot exec" message, which is
// not counted against the limit.
const startFailureSlack = 4096
