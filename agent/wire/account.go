package wire

import (
	"fmt"
	"strconv"
	"strings"
)

// Account names and ids as the exec and file paths both accept them
// (docker's and runc's rules).

// ValidAccountName reports whether s can be a user or group name.
func ValidAccountName(s string) bool {
	if s == "" || s[0] == '-' || s[0] == '.' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '.', c == '-':
		case c == '$' && i == len(s)-1:
		default:
			return false
		}
	}
	return true
}

// ParseAccountID parses a decimal id; 4294967295 (-1) is not one.
func ParseAccountID(s string) (uint32, bool) {
	if s == "" || s[0] < '0' || s[0] > '9' {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil || n == 1<<32-1 {
		return 0, false
	}
	return uint32(n), true
}

// ParseUserSpec splits "user[:group]" and checks its syntax: each part is a
// decimal id or a name of letters, digits, '_', '.', '-' (and a trailing
// '$', as Samba machine accounts have).
func ParseUserSpec(spec string) (user, group string, err error) {
	if len(spec) > MaxUserLen {
		return "", "", fmt.Errorf("%w: user: %d bytes, at most %d allowed", ErrInvalid, len(spec), MaxUserLen)
	}
	user, group, hasGroup := strings.Cut(spec, ":")
	if !ValidAccountName(user) || (hasGroup && !ValidAccountName(group)) {
		return "", "", fmt.Errorf("%w: user: %q is not NAME, UID, NAME:GROUP or UID:GID", ErrInvalid, spec)
	}
	return user, group, nil
}

// CheckUserSpec reports whether spec is syntactically a user for file
// operations ("", NAME, UID, NAME:GROUP, UID:GID); whether it exists is
// for the sandbox to say.
func CheckUserSpec(spec string) error {
	if spec == "" {
		return nil
	}
	_, _, err := ParseUserSpec(spec)
	return err
}
