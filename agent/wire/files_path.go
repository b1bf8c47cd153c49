package wire

import (
	"fmt"
	"strconv"
	"strings"
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
	if len(p) <= keep {
		return strconv.Quote(p)
	}
	return strconv.Quote(p[:keep]) + fmt.Sprintf("... (%d bytes)", len(p))
}
