package jsonline

import "strconv"

// Scanner reads back the form this package appends, and nothing else: an
// object with its keys in a fixed order, no white space, strings of
// printable ASCII without escapes, integers without sign or exponent
// tricks. It is the fast path of a decoder whose fallback is
// encoding/json: on anything outside that form the scanner only says so
// (Ok is false), and the caller hands the same bytes to json.Unmarshal,
// so what a hostile writer can do is exactly what it could before. What
// the scanner accepts, it must decode to the same values json.Unmarshal
// would; the users' fuzz tests compare the two.
type Scanner struct {
	b   []byte
	i   int
	bad bool
}

// NewScanner scans b.
func NewScanner(b []byte) *Scanner { return &Scanner{b: b} }

// Ok reports whether everything so far was in the form and b is used up.
func (s *Scanner) Ok() bool { return !s.bad && s.i == len(s.b) }

// Fail marks the input as outside the form.
func (s *Scanner) Fail() { s.bad = true }

func (s *Scanner) byte(c byte) {
	if s.bad || s.i >= len(s.b) || s.b[s.i] != c {
		s.bad = true
		return
	}
	s.i++
}

// Open reads '{'.
func (s *Scanner) Open() { s.byte('{') }

// Close reads '}'.
func (s *Scanner) Close() { s.byte('}') }

// Field reads `"name":` (after a comma unless it opens the object) and
// reports whether it was there; if it was not, nothing is read, so an
// optional field can be tried and the next one read instead.
func (s *Scanner) Field(name string) bool {
	if s.bad {
		return false
	}
	i := s.i
	if i > 0 && s.b[i-1] != '{' {
		if i >= len(s.b) || s.b[i] != ',' {
			return false
		}
		i++
	}
	end := i + len(name) + 3
	if end > len(s.b) || s.b[i] != '"' || string(s.b[i+1:end-2]) != name || s.b[end-2] != '"' || s.b[end-1] != ':' {
		return false
	}
	s.i = end
	return true
}

// Need reads a field that must be there.
func (s *Scanner) Need(name string) {
	if !s.Field(name) {
		s.bad = true
	}
}

// Quoted reads a string without escapes and returns it with its quotes.
func (s *Scanner) Quoted() []byte {
	if s.bad || s.i >= len(s.b) || s.b[s.i] != '"' {
		s.bad = true
		return nil
	}
	for j := s.i + 1; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			q := s.b[s.i : j+1]
			s.i = j + 1
			return q
		case c < 0x20 || c > 0x7e || c == '\\':
			s.bad = true // an escape or a byte encoding/json must judge
			return nil
		}
	}
	s.bad = true
	return nil
}

// String reads a string without escapes.
func (s *Scanner) String() string {
	q := s.Quoted()
	if len(q) < 2 {
		return ""
	}
	return string(q[1 : len(q)-1])
}

// OptString reads the string field name if it is there ("" if not), the
// reading side of OmitEmpty.
func (s *Scanner) OptString(name string) string {
	if !s.Field(name) {
		return ""
	}
	return s.String()
}

// digits reads an integer's text: an optional '-' then 0 or digits
// without a leading zero ("-0" is left to encoding/json).
func (s *Scanner) digits() string {
	if s.bad {
		return ""
	}
	j := s.i
	if j < len(s.b) && s.b[j] == '-' {
		j++
	}
	k := j
	for k < len(s.b) && s.b[k] >= '0' && s.b[k] <= '9' {
		k++
	}
	if k == j || (s.b[j] == '0' && (k-j > 1 || j > s.i)) {
		s.bad = true
		return ""
	}
	if k < len(s.b) && (s.b[k] == '.' || s.b[k] == 'e' || s.b[k] == 'E') {
		s.bad = true // a number encoding/json must judge for an integer field
		return ""
	}
	t := string(s.b[s.i:k])
	s.i = k
	return t
}

// Int reads an integer that fits in bits bits.
func (s *Scanner) Int(bits int) int64 {
	n, err := strconv.ParseInt(s.digits(), 10, bits)
	s.check(err)
	return n
}

// Uint reads an unsigned integer that fits in bits bits.
func (s *Scanner) Uint(bits int) uint64 {
	n, err := strconv.ParseUint(s.digits(), 10, bits)
	s.check(err)
	return n
}

// check marks the input as outside the form if a number did not parse
// (digits gives "" once the input is, which never parses).
func (s *Scanner) check(err error) {
	if err != nil {
		s.bad = true
	}
}
