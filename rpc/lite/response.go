//go:build linux

package lite

import (
	"errors"
	"io"
	"strconv"
	"syscall"
)

// MaxMessageBytes bounds one message, as apiwire.MaxMessageBytes does for
// the full client (a test keeps them equal; this package stays free of
// apiwire's imports so the front binary stays small).
const MaxMessageBytes = 8 << 20

// Envelope flags of the Connect protocol.
const (
	flagCompressed = 0x01
	flagEndStream  = 0x02
)

// ReadResponse reads an HTTP/1.1 response carrying a Connect stream of
// ExecStreamResponse messages from r, writes the output events to stdout and
// stderr and returns the last result. Errors are as for Conn.ExecStream.
func ReadResponse(r io.Reader, stdout, stderr io.Writer) (*Result, error) {
	br := &bufReader{r: r, buf: make([]byte, 16<<10)}
	b, err := readHead(br)
	if err != nil {
		return nil, err
	}
	var (
		hdr     [5]byte
		payload []byte
		data    []byte
		res     *Result
	)
	for {
		_, err := io.ReadFull(b, hdr[:])
		switch {
		case err == io.EOF:
			// connect-go's words for a stream cut before its end message.
			return nil, &Error{"internal", "protocol error: unexpected EOF"}
		case b.lost(err):
			return nil, lostErr(err)
		case err != nil:
			return nil, &Error{"invalid_argument", "protocol error: incomplete envelope: " + err.Error()}
		}
		size := int64(hdr[1])<<24 | int64(hdr[2])<<16 | int64(hdr[3])<<8 | int64(hdr[4])
		if size > MaxMessageBytes {
			if _, err := io.CopyN(io.Discard, b, size); err != nil && err != io.EOF {
				return nil, &Error{"resource_exhausted", "message is larger than configured max " + itoa(MaxMessageBytes) + " - unable to determine message size: " + err.Error()}
			}
			return nil, &Error{"resource_exhausted", "message size " + itoa(size) + " is larger than configured max " + itoa(MaxMessageBytes)}
		}
		if int64(cap(payload)) < size {
			payload = make([]byte, size)
		}
		payload = payload[:size]
		if got, err := io.ReadFull(b, payload); err != nil {
			if err == io.EOF || err == io.ErrUnexpectedEOF && !b.broken {
				return nil, &Error{"invalid_argument", "protocol error: promised " + itoa(size) + " bytes in enveloped message, got " + itoa(int64(got)) + " bytes"}
			}
			if b.lost(err) {
				return nil, lostErr(err)
			}
			return nil, &Error{"unknown", "read enveloped message: " + err.Error()}
		}
		flags := hdr[0]
		switch {
		case flags&flagCompressed != 0:
			// boxctl asks for no compression, as the full client does.
			return nil, &Error{"internal", "protocol error: sent compressed message without compression support"}
		case flags == 0 && size == 0:
			continue // an empty message: no event
		case flags != 0:
			extra, err := drain(b)
			if err != nil {
				return nil, &Error{"internal", "corrupt response: I/O error after end-stream message: " + err.Error()}
			}
			if extra > 0 {
				return nil, &Error{"internal", "corrupt response: " + itoa(extra) + " extra bytes after end of stream"}
			}
			if flags&flagEndStream == 0 {
				return nil, &Error{"internal", "protocol error: invalid envelope flags " + itoa(int64(flags))}
			}
			e, err := parseEndStream(payload)
			if err != nil {
				return nil, &Error{"internal", "unmarshal end stream message: " + err.Error()}
			}
			if e != nil {
				return nil, e
			}
			return res, nil
		}
		ev, err := parseEvent(payload, data[:0])
		if err != nil {
			return nil, &Error{"invalid_argument", "unmarshal message: " + err.Error()}
		}
		if ev.data != nil {
			data = ev.data[:0] // reuse the storage for the next message
		}
		switch ev.kind {
		case eventStdout:
			if _, err := stdout.Write(ev.data); err != nil && err != io.ErrShortWrite {
				return nil, err
			}
		case eventStderr:
			_, _ = stderr.Write(ev.data)
		case eventResult:
			res = ev.result
		}
	}
}

// lostErr reports an answer cut off by the connection's end (boxd killed
// or restarted mid-call) in apiwire's words (its lostBody): unavailable,
// where connect-go would say invalid_argument or unknown.
func lostErr(err error) *Error {
	return &Error{"unavailable", "connection to boxd lost mid-call: " + err.Error()}
}

// drain reads r to its end and counts the bytes. (io.Discard would take an
// 8 KiB buffer, fresh memory, to read the nothing that normally follows.)
func drain(r io.Reader) (int64, error) {
	var buf [256]byte
	var n int64
	for {
		m, err := r.Read(buf[:])
		n += int64(m)
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// bufReader buffers reads from the connection; large reads bypass it.
type bufReader struct {
	r    io.Reader
	buf  []byte
	i, n int
	err  error
}

func (b *bufReader) fill() error {
	if b.i < b.n {
		return nil
	}
	if b.err != nil {
		return b.err
	}
	b.i = 0
	b.n, b.err = b.r.Read(b.buf)
	if b.n > 0 {
		return nil
	}
	if b.err == nil {
		b.err = io.ErrNoProgress
	}
	return b.err
}

func (b *bufReader) Read(p []byte) (int, error) {
	if b.i == b.n && len(p) >= len(b.buf) && b.err == nil {
		return b.r.Read(p)
	}
	if err := b.fill(); err != nil {
		return 0, err
	}
	n := copy(p, b.buf[b.i:b.n])
	b.i += n
	return n, nil
}

// line returns the next line without its CRLF (or LF); the result is valid
// until the next read. A line longer than the buffer is malformed.
func (b *bufReader) line() ([]byte, error) {
	for {
		for j := b.i; j < b.n; j++ {
			if b.buf[j] == '\n' {
				l := b.buf[b.i:j]
				b.i = j + 1
				if len(l) > 0 && l[len(l)-1] == '\r' {
					l = l[:len(l)-1]
				}
				return l, nil
			}
		}
		if b.i > 0 {
			b.n = copy(b.buf, b.buf[b.i:b.n])
			b.i = 0
		}
		if b.n == len(b.buf) {
			return nil, errMalformed
		}
		if b.err != nil {
			if b.err == io.EOF {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, b.err
		}
		m, err := b.r.Read(b.buf[b.n:])
		b.n += m
		if err != nil {
			b.err = err
		} else if m == 0 {
			b.err = io.ErrNoProgress
		}
	}
}

// readHead reads the status line and headers and returns the body's reader.
// A response that is not a Connect JSON stream with status 200 means no
// handler ran: *NotServedError.
func readHead(br *bufReader) (*body, error) {
	notServed := func(err error) error { return &NotServedError{"read response", err} }
	l, err := br.line()
	if err != nil {
		return nil, headErr(err)
	}
	// "HTTP/1.1 200 OK"
	if len(l) < 12 || string(l[:7]) != "HTTP/1." || l[8] != ' ' || (len(l) > 12 && l[12] != ' ') {
		return nil, notServed(errMalformed)
	}
	if status := string(l[9:12]); status != "200" {
		return nil, notServed(errors.New("HTTP status " + string(l[9:])))
	}
	b := &body{br: br, left: -1}
	contentType := ""
	for total := 0; ; {
		l, err := br.line()
		if err != nil {
			return nil, headErr(err)
		}
		if len(l) == 0 {
			break
		}
		if total += len(l); total > 64<<10 {
			return nil, notServed(errMalformed)
		}
		name, value, ok := cutHeader(l)
		if !ok {
			return nil, notServed(errMalformed)
		}
		switch {
		case equalFoldASCII(name, "Content-Type"):
			contentType = value
		case equalFoldASCII(name, "Transfer-Encoding"):
			if !equalFoldASCII(value, "chunked") {
				return nil, notServed(errors.New("unsupported transfer encoding " + value))
			}
			b.chunked = true
		case equalFoldASCII(name, "Content-Length"):
			n, err := strconv.ParseInt(value, 10, 64)
			if err != nil || n < 0 {
				return nil, notServed(errMalformed)
			}
			b.left = n
		}
	}
	if contentType != "application/connect+json" {
		return nil, notServed(errors.New("content type " + strconv.Quote(contentType)))
	}
	if b.chunked {
		b.left = 0
	}
	return b, nil
}

// headErr: the connection ended or failed before a whole response head. boxd
// may have run the command and died, so this is not NotServed; connect-go
// reports such a failure as unavailable.
func headErr(err error) error {
	if err == errMalformed {
		return &NotServedError{"read response", err}
	}
	return &Error{"unavailable", err.Error()}
}

func cutHeader(l []byte) (name, value string, ok bool) {
	for i, c := range l {
		if c == ':' {
			v := l[i+1:]
			for len(v) > 0 && (v[0] == ' ' || v[0] == '\t') {
				v = v[1:]
			}
			for len(v) > 0 && (v[len(v)-1] == ' ' || v[len(v)-1] == '\t') {
				v = v[:len(v)-1]
			}
			return string(l[:i]), string(v), i > 0
		}
	}
	return "", "", false
}

func equalFoldASCII(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// body reads a response body: chunked, of a Content-Length, or up to the
// connection's end. It returns io.EOF at the body's proper end and
// io.ErrUnexpectedEOF, with broken set, when the connection ends early.
type body struct {
	br      *bufReader
	chunked bool
	left    int64 // bytes left in this chunk or body; -1: until EOF
	done    bool
	broken  bool
	// chunkSeen: a chunk was read, so a CRLF precedes the next size line.
	chunkSeen bool
}

// lost reports whether err, from Read, means the connection ended or
// failed mid-body, rather than a body that ended early or a bad framing.
func (b *body) lost(err error) bool {
	_, errno := err.(syscall.Errno)
	return err == io.ErrUnexpectedEOF && b.broken || errno
}

func (b *body) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	if b.chunked && b.left == 0 {
		if err := b.nextChunk(); err != nil {
			return 0, err
		}
		if b.done {
			return 0, io.EOF
		}
	}
	if !b.chunked && b.left == 0 {
		b.done = true
		return 0, io.EOF
	}
	if b.left > 0 && int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.br.Read(p)
	if b.left > 0 {
		b.left -= int64(n)
	}
	if err == io.EOF {
		if b.left < 0 {
			b.done = true
			return n, io.EOF
		}
		b.broken = true
		return n, io.ErrUnexpectedEOF
	}
	return n, err
}

// nextChunk reads the CRLF ending the previous chunk, if any, and the next
// chunk's size line; the last chunk's trailers are read and dropped.
func (b *body) nextChunk() error {
	fail := func(err error) error {
		if err == io.ErrUnexpectedEOF {
			b.broken = true
		}
		return err
	}
	if b.chunkSeen {
		l, err := b.br.line()
		if err != nil {
			return fail(err)
		}
		if len(l) != 0 {
			return fail(errMalformed)
		}
	}
	b.chunkSeen = true
	l, err := b.br.line()
	if err != nil {
		return fail(err)
	}
	for i, c := range l {
		if c == ';' {
			l = l[:i]
			break
		}
	}
	for len(l) > 0 && (l[len(l)-1] == ' ' || l[len(l)-1] == '\t') {
		l = l[:len(l)-1]
	}
	if len(l) == 0 || len(l) > 15 {
		return fail(errMalformed)
	}
	var n int64
	for _, c := range l {
		switch {
		case '0' <= c && c <= '9':
			n = n<<4 | int64(c-'0')
		case 'a' <= c && c <= 'f':
			n = n<<4 | int64(c-'a'+10)
		case 'A' <= c && c <= 'F':
			n = n<<4 | int64(c-'A'+10)
		default:
			return fail(errMalformed)
		}
	}
	if n == 0 {
		for {
			l, err := b.br.line()
			if err != nil {
				return fail(err)
			}
			if len(l) == 0 {
				break
			}
		}
		b.done = true
		return nil
	}
	b.left = n
	return nil
}
