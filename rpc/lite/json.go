//go:build linux

package lite

import (
	"encoding/base64"
	"errors"
	"strings"
	"unicode/utf8"
)

// The JSON here is read as the full client reads it: ExecStreamResponse as
// protojson does (proto3 JSON or proto field names, null as unset, unknown
// fields skipped, a oneof set once, bytes in either base64 alphabet, with or
// without padding), the end-of-stream message as encoding/json does (field
// names matched case-insensitively, unknown fields skipped). Values of
// fields boxctl does not use are checked as JSON only.

const (
	eventNone = iota
	eventStdout
	eventStderr
	eventResult
)

type event struct {
	kind   int
	data   []byte // output, decoded into the buffer given to parseEvent
	result *Result
}

var (
	errSyntax    = errors.New("invalid JSON")
	errType      = errors.New("unexpected JSON value type")
	errDuplicate = errors.New("duplicate field")
	errOneof     = errors.New("oneof boxd.v1.ExecStreamResponse.event is already set")
	errRange     = errors.New("integer out of range")

	b64StdRaw = base64.StdEncoding.WithPadding(base64.NoPadding)
	b64URLRaw = base64.URLEncoding.WithPadding(base64.NoPadding)
)

// maxDepth bounds the nesting of skipped values.
const maxDepth = 64

type scanner struct {
	b []byte
	i int
}

func (s *scanner) peek() byte {
	for s.i < len(s.b) {
		switch c := s.b[s.i]; c {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return c
		}
	}
	return 0
}

func (s *scanner) consume(c byte) bool {
	if s.peek() == c {
		s.i++
		return true
	}
	return false
}

func (s *scanner) literal(lit string) bool {
	if s.peek() == lit[0] && len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
		s.i += len(lit)
		return true
	}
	return false
}

// end reports whether only whitespace is left.
func (s *scanner) end() bool { return s.peek() == 0 && s.i == len(s.b) }

// rawString reads a string and returns its bytes between the quotes, still
// escaped if escaped is true. The escapes are checked.
func (s *scanner) rawString() (raw []byte, escaped bool, err error) {
	if !s.consume('"') {
		return nil, false, errSyntax
	}
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			raw = s.b[start:s.i]
			s.i++
			return raw, escaped, nil
		case c < 0x20:
			return nil, false, errSyntax
		case c == '\\':
			escaped = true
			if s.i+1 >= len(s.b) {
				return nil, false, errSyntax
			}
			switch s.b[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if hex4(s.b[s.i+2:]) < 0 {
					return nil, false, errSyntax
				}
				s.i += 6
			default:
				return nil, false, errSyntax
			}
		default:
			s.i++
		}
	}
	return nil, false, errSyntax
}

// hex4 decodes the 4 hex digits at the start of b, or returns -1.
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// unquote appends the string raw (checked by rawString) to dst as
// encoding/json decodes it: invalid UTF-8 and unpaired surrogates become
// U+FFFD.
func unquote(dst, raw []byte, escaped bool) []byte {
	if !escaped && utf8.Valid(raw) {
		return append(dst, raw...)
	}
	for i := 0; i < len(raw); {
		c := raw[i]
		if c == '\\' {
			switch e := raw[i+1]; e {
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				r := hex4(raw[i+2:])
				i += 6
				if 0xd800 <= r && r < 0xe000 {
					if r < 0xdc00 && i+1 < len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
						if r2 := hex4(raw[i+2:]); 0xdc00 <= r2 && r2 < 0xe000 {
							r = 0x10000 + (r-0xd800)<<10 + (r2 - 0xdc00)
							i += 6
							dst = utf8.AppendRune(dst, r)
							continue
						}
					}
					r = utf8.RuneError
				}
				dst = utf8.AppendRune(dst, r)
				continue
			default: // '"', '\\', '/'
				dst = append(dst, e)
			}
			i += 2
			continue
		}
		if c < utf8.RuneSelf {
			dst = append(dst, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(raw[i:])
		dst = utf8.AppendRune(dst, r) // RuneError for an invalid byte
		i += n
	}
	return dst
}

func (s *scanner) str() (string, error) {
	raw, esc, err := s.rawString()
	if err != nil {
		return "", err
	}
	if !esc && utf8.Valid(raw) {
		return string(raw), nil
	}
	return string(unquote(nil, raw, esc)), nil
}

// skip checks and skips one value.
func (s *scanner) skip(depth int) error {
	if depth > maxDepth {
		return errSyntax
	}
	switch c := s.peek(); {
	case c == '{':
		s.i++
		if s.consume('}') {
			return nil
		}
		for {
			if _, _, err := s.rawString(); err != nil {
				return err
			}
			if !s.consume(':') {
				return errSyntax
			}
			if err := s.skip(depth + 1); err != nil {
				return err
			}
			if s.consume('}') {
				return nil
			}
			if !s.consume(',') {
				return errSyntax
			}
		}
	case c == '[':
		s.i++
		if s.consume(']') {
			return nil
		}
		for {
			if err := s.skip(depth + 1); err != nil {
				return err
			}
			if s.consume(']') {
				return nil
			}
			if !s.consume(',') {
				return errSyntax
			}
		}
	case c == '"':
		_, _, err := s.rawString()
		return err
	case c == '-' || '0' <= c && c <= '9':
		_, err := s.number()
		return err
	case s.literal("true") || s.literal("false") || s.literal("null"):
		return nil
	}
	return errSyntax
}

// number reads a JSON number and returns its text.
func (s *scanner) number() ([]byte, error) {
	s.peek()
	start := s.i
	digits := func() int {
		n := 0
		for s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9' {
			s.i++
			n++
		}
		return n
	}
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	if s.i < len(s.b) && s.b[s.i] == '0' {
		s.i++
	} else if digits() == 0 {
		return nil, errSyntax
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if digits() == 0 {
			return nil, errSyntax
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if digits() == 0 {
			return nil, errSyntax
		}
	}
	return s.b[start:s.i], nil
}

// int32Value reads an int32 as protojson accepts it from boxd: a JSON
// integer, or one in a string.
func (s *scanner) int32Value() (int32, error) {
	var text []byte
	if s.peek() == '"' {
		raw, esc, err := s.rawString()
		if err != nil {
			return 0, err
		}
		if esc {
			return 0, errType
		}
		text = raw
	} else {
		t, err := s.number()
		if err != nil {
			return 0, err
		}
		text = t
	}
	neg := len(text) > 0 && text[0] == '-'
	if neg {
		text = text[1:]
	}
	if len(text) == 0 || len(text) > 1 && text[0] == '0' {
		return 0, errType
	}
	var n int64
	for _, c := range text {
		if c < '0' || c > '9' {
			return 0, errType
		}
		if n = n*10 + int64(c-'0'); n > 1<<31 {
			return 0, errRange
		}
	}
	if neg {
		n = -n
	}
	if n > 1<<31-1 {
		return 0, errRange
	}
	return int32(n), nil
}

func (s *scanner) boolValue() (bool, error) {
	switch {
	case s.literal("true"):
		return true, nil
	case s.literal("false"):
		return false, nil
	}
	return false, errType
}

// fields tracks which field numbers a message has seen, as protojson
// refuses a field given twice (also under its two names).
type fields uint32

func (f *fields) see(n int) error {
	if *f&(1<<n) != 0 {
		return errDuplicate
	}
	*f |= 1 << n
	return nil
}

// object reads a JSON object, calling field with each key (unescaped) while
// the scanner stands at its value; field must consume the value.
func (s *scanner) object(field func(key []byte) error) error {
	if !s.consume('{') {
		if s.peek() == 0 {
			return errSyntax
		}
		return errType
	}
	if s.consume('}') {
		return nil
	}
	var keyBuf [32]byte
	for {
		raw, esc, err := s.rawString()
		if err != nil {
			return err
		}
		key := raw
		if esc {
			key = unquote(keyBuf[:0], raw, esc)
		}
		if !s.consume(':') {
			return errSyntax
		}
		if err := field(key); err != nil {
			return err
		}
		if s.consume('}') {
			return nil
		}
		if !s.consume(',') {
			return errSyntax
		}
	}
}

// parseEvent decodes one ExecStreamResponse. Output bytes are decoded into
// buf's storage when it is large enough.
func parseEvent(msg, buf []byte) (event, error) {
	s := &scanner{b: msg}
	var ev event
	var seen fields
	oneof := false
	err := s.object(func(key []byte) error {
		num := 0
		switch string(key) {
		case "stdout":
			num = 1
		case "stderr":
			num = 2
		case "result":
			num = 3
		default:
			return s.skip(0)
		}
		if err := seen.see(num); err != nil {
			return err
		}
		if s.literal("null") {
			return nil
		}
		if oneof {
			return errOneof
		}
		oneof = true
		if num == 3 {
			r, err := s.result()
			ev.kind, ev.result = eventResult, r
			return err
		}
		raw, esc, err := s.rawString()
		if err != nil {
			return errType
		}
		if esc {
			raw = unquote(nil, raw, esc)
		}
		ev.data, err = decodeBytes(buf, raw)
		ev.kind = eventStdout
		if num == 2 {
			ev.kind = eventStderr
		}
		return err
	})
	if err == nil && !s.end() {
		err = errSyntax
	}
	return ev, err
}

// decodeBytes decodes a protojson bytes value into buf's storage.
func decodeBytes(buf, s []byte) ([]byte, error) {
	enc := base64.StdEncoding
	for _, c := range s {
		if c == '-' || c == '_' {
			enc = base64.URLEncoding
			break
		}
	}
	if len(s)%4 != 0 {
		if enc == base64.StdEncoding {
			enc = b64StdRaw
		} else {
			enc = b64URLRaw
		}
	}
	if n := enc.DecodedLen(len(s)); cap(buf) < n {
		buf = make([]byte, n)
	}
	n, err := enc.Decode(buf[:cap(buf)], s)
	return buf[:n], err
}

// result decodes an ExecResult object.
func (s *scanner) result() (*Result, error) {
	r := &Result{}
	var seen fields
	err := s.object(func(key []byte) error {
		num := 0
		switch string(key) {
		case "exitCode", "exit_code":
			num = 1
		case "signal":
			num = 2
		case "timedOut", "timed_out":
			num = 3
		case "truncated":
			num = 4
		case "startedAt", "started_at":
			num = 5
		case "endedAt", "ended_at":
			num = 6
		case "userCpuUsec", "user_cpu_usec":
			num = 7
		case "systemCpuUsec", "system_cpu_usec":
			num = 8
		case "maxRssBytes", "max_rss_bytes":
			num = 9
		case "oomKilled", "oom_killed":
			num = 11
		default:
			return s.skip(0)
		}
		if err := seen.see(num); err != nil {
			return err
		}
		if s.literal("null") {
			return nil
		}
		var err error
		switch num {
		case 1:
			r.ExitCode, err = s.int32Value()
		case 2:
			r.Signal, err = s.str()
		case 3:
			r.TimedOut, err = s.boolValue()
		case 4:
			r.Truncated, err = s.boolValue()
		case 11:
			r.OOMKilled, err = s.boolValue()
		default:
			err = s.skip(0)
		}
		return err
	})
	return r, err
}

// parseEndStream decodes Connect's end-of-stream message and returns its
// error, nil when the stream ended well.
func parseEndStream(msg []byte) (*Error, error) {
	s := &scanner{b: msg}
	if s.literal("null") && s.end() {
		return nil, nil // encoding/json leaves the message unset
	}
	var e *Error
	err := s.object(func(key []byte) error {
		if !strings.EqualFold(string(key), "error") {
			return s.skip(0)
		}
		if s.literal("null") {
			e = nil
			return nil
		}
		if e == nil {
			e = &Error{Code: "unknown"}
		}
		// connect-go decodes each "error" afresh into the one error: the
		// message is replaced, a code it cannot read keeps the one before.
		var code, message string
		err := s.object(func(key []byte) error {
			var dst *string
			switch {
			case strings.EqualFold(string(key), "code"):
				dst = &code
			case strings.EqualFold(string(key), "message"):
				dst = &message
			default:
				return s.skip(0)
			}
			if s.literal("null") {
				return nil
			}
			if s.peek() != '"' {
				return errType
			}
			v, err := s.str()
			*dst = v
			return err
		})
		e.Message = message
		if c := connectCode(code); c != "" {
			e.Code = c
		}
		return err
	})
	if err == nil && !s.end() {
		err = errSyntax
	}
	return e, err
}

// connectCode returns c if connect-go knows the code, else "".
func connectCode(c string) string {
	switch c {
	case "canceled", "unknown", "invalid_argument", "deadline_exceeded", "not_found",
		"already_exists", "permission_denied", "resource_exhausted", "failed_precondition",
		"aborted", "out_of_range", "unimplemented", "internal", "unavailable", "data_loss",
		"unauthenticated":
		return c
	}
	return ""
}
