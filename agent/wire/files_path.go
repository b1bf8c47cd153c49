package wire

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// CheckFilePath reports why p cannot name a file: empty, a NUL byte, longer
// than MaxPathLen, or a component longer than MaxNameLen. The error says
// which path (abbreviated if long) and wraps ErrInvalid.
func CheckFilePath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("%w: empty path", ErrInvalid)
	case strings.IndexByte(p, 0) >= 0:
		return fmt.Errorf("%w: path %s contains a NUL byte", ErrInvalid, QuotePath(p))
	case len(p) > MaxPathLen:
		return fmt.Errorf("%w: path %s is %d bytes, longer than PATH_MAX (%d)", ErrInvalid, QuotePath(p), len(p), MaxPathLen+1)
	}
	for rest := p; rest != ""; {
		var c string
		c, rest, _ = strings.Cut(rest, "/")
		if len(c) > MaxNameLen {
			return fmt.Errorf("%w: path %s has a %d byte component, longer than NAME_MAX (%d)", ErrInvalid, QuotePath(p), len(c), MaxNameLen)
		}
	}
	return nil
}

// QuotePath quotes p for a message, abbreviated if long: a hostile 4 KiB
// path should not make every error 4 KiB.
func QuotePath(p string) string {
	const keep = 96
	if q := strconv.Quote(p); len(q) <= keep+2 {
		return q
	}
	// Cut the path so that its quoted form fits: an escape makes one byte
	// up to four characters (a name of control bytes would otherwise give
	// a 400-character message).
	n := min(len(p), keep)
	for n > 0 && ((n < len(p) && !utf8.RuneStart(p[n])) || len(strconv.Quote(p[:n])) > keep+2) {
		n--
	}
	return strconv.Quote(p[:n]) + fmt.Sprintf("... (%d bytes)", len(p))
}
