//go:build linux

// Package lite is a minimal client for one call, SandboxService.ExecStream,
// spoken as the Connect streaming protocol with the JSON codec over HTTP/1.1
// on boxd's Unix socket. It exists for boxctl's front binary, whose whole run
// should cost little more than a Go hello world: it uses raw socket syscalls
// and a hand-written encoder and decoder for exactly these messages instead
// of net, net/http, protobuf and encoding/json, whose initialisation and
// first use alone cost milliseconds at every process start.
//
// It reports what the full client (connect-go) would report: boxd's errors
// and protocol failures come back as *Error, spelled as connect-go spells
// them, so boxctl prints the same text either way.
package lite

import (
	"errors"
	"io"
	"syscall"
)

// ExecRequest holds the fields of boxdv1.ExecRequest that boxctl sends.
type ExecRequest struct {
	SandboxID string
	Args      []string
	Env       []string
	Workdir   string
	Timeout   string
}

// Result holds the fields of boxdv1.ExecResult that boxctl reads.
type Result struct {
	ExitCode  int32
	Signal    string
	TimedOut  bool
	Truncated bool
	OOMKilled bool
}

// Error is a Connect error, from boxd or from a broken stream. Code is
// connect-go's spelling of the code ("not_found", ...).
type Error struct {
	Code    string
	Message string
}

// Error spells e as connect-go's Error does.
func (e *Error) Error() string { return e.Code + ": " + e.Message }

// NotServedError means no handler ran the request: boxd could not be reached,
// or answered without running it (an HTTP error, not a Connect stream). The
// caller may retry the request another way, since the command did not run.
type NotServedError struct {
	Op  string
	Err error
}

func (e *NotServedError) Error() string { return e.Op + ": " + e.Err.Error() }
func (e *NotServedError) Unwrap() error { return e.Err }

// Conn is one connection to boxd, for one call.
type Conn struct{ fd int }

// Dial connects to boxd's Unix socket at path. The connect does not wait
// when boxd's backlog is full (EAGAIN), as Go's net package does not, so a
// caller falling back to the full client sees what it would see; the
// connection is then made blocking, as this client uses it.
func Dial(path string) (*Conn, error) {
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC|syscall.SOCK_NONBLOCK, 0)
	if err != nil {
		return nil, &NotServedError{"socket", err}
	}
	if err := syscall.Connect(fd, &syscall.SockaddrUnix{Name: path}); err != nil {
		syscall.Close(fd)
		return nil, &NotServedError{"connect " + path, err}
	}
	if err := syscall.SetNonblock(fd, false); err != nil {
		syscall.Close(fd)
		return nil, &NotServedError{"connect " + path, err}
	}
	return &Conn{fd: fd}, nil
}

// Close closes the connection; boxd then kills a command still running.
func (c *Conn) Close() error { return syscall.Close(c.fd) }

func (c *Conn) Read(p []byte) (int, error) {
	for {
		n, err := syscall.Read(c.fd, p)
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return 0, err
		case n == 0 && len(p) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

func (c *Conn) Write(p []byte) (int, error) {
	done := 0
	for done < len(p) {
		n, err := syscall.Write(c.fd, p[done:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return done, err
		}
		done += n
	}
	return done, nil
}

// ExecStream runs req and writes the command's output to stdout and stderr
// as it arrives, one Write per message. It returns the command's result, or
// *Error (boxd's error, or a broken stream), *NotServedError (the request
// never ran: the caller may retry), or stdout's write error, which ends the
// call as it does the full CLI's (errors writing to stderr are ignored, as
// there).
func (c *Conn) ExecStream(req *ExecRequest, stdout, stderr io.Writer) (*Result, error) {
	if _, err := c.Write(AppendHTTPRequest(nil, req)); err != nil {
		// boxd reads the whole request before it runs anything.
		return nil, &NotServedError{"send request", err}
	}
	return ReadResponse(c, stdout, stderr)
}

var errMalformed = errors.New("malformed HTTP response")
