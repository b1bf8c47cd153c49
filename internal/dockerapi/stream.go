//go:build linux

package dockerapi

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
)

// Stream numbers of Docker's multiplexed framing (stdcopy).
const (
	streamStdin  = 0
	streamStdout = 1
	streamStderr = 2
)

// muxWriter writes Docker's multiplexed framing: each write is one frame
// of an 8-byte header (stream, three zero bytes, big-endian length) and
// the data. Safe for concurrent use.
type muxWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (m *muxWriter) frame(stream byte, p []byte) error {
	if len(p) == 0 {
		return nil
	}
	var hdr [8]byte
	hdr[0] = stream
	binary.BigEndian.PutUint32(hdr[4:], uint32(len(p)))
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := m.w.Write(hdr[:]); err != nil {
		return err
	}
	_, err := m.w.Write(p)
	return err
}

// streamWriter is one stream of a muxWriter, or the raw connection for a
// TTY (whose output is one stream, as Docker sends it).
type streamWriter struct {
	m      *muxWriter
	stream byte
	raw    bool
}

func (s streamWriter) Write(p []byte) (int, error) {
	if s.raw {
		s.m.mu.Lock()
		defer s.m.mu.Unlock()
		return s.m.w.Write(p)
	}
	if err := s.m.frame(s.stream, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// hijacked is a connection taken over for a raw stream (exec start,
// attach): reads are the client's stdin, writes the output.
type hijacked struct {
	conn net.Conn
	r    *bufio.Reader
	out  *muxWriter
}

// hijack takes the connection over and answers as Docker does: 101
// UPGRADED when the client asked to upgrade to tcp, else 200, with the
// raw-stream type (multiplexed-stream from API 1.42 when there is no TTY).
func hijack(w http.ResponseWriter, r *http.Request, tty bool) (*hijacked, error) {
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil, fmt.Errorf("hijack the connection: %w", err)
	}
	ctype := "application/vnd.docker.raw-stream"
	if !tty && !versionLess(apiVersion(r), "1.42") {
		ctype = "application/vnd.docker.multiplexed-stream"
	}
	head := "HTTP/1.1 200 OK\r\nContent-Type: " + ctype + "\r\n\r\n"
	if r.Header.Get("Upgrade") != "" {
		head = "HTTP/1.1 101 UPGRADED\r\nContent-Type: " + ctype + "\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n"
	}
	if _, err := conn.Write([]byte(head)); err != nil {
		conn.Close()
		return nil, err
	}
	return &hijacked{conn: conn, r: brw.Reader, out: &muxWriter{w: conn}}, nil
}

// writers are the stdout and stderr writers of the stream.
func (h *hijacked) writers(tty bool) (io.Writer, io.Writer) {
	return streamWriter{h.out, streamStdout, tty}, streamWriter{h.out, streamStderr, tty}
}

func (h *hijacked) close() { h.conn.Close() }

// flushWriter flushes an HTTP response after every write, so a followed
// log reaches the client as it is written.
type flushWriter struct {
	w http.ResponseWriter
}

func (f flushWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if fl, ok := f.w.(http.Flusher); ok {
		fl.Flush()
	}
	return n, err
}

func (s streamWriter) writeAll(p []byte) error {
	_, err := s.Write(p)
	return err
}
