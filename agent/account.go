package agent

import "strconv"

// Account names and ids as the exec and file paths both accept them
// (docker's and runc's rules).

func validAccountName(s string) bool {
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

// parseAccountID parses a decimal id; 4294967295 (-1) is not one.
func parseAccountID(s string) (uint32, bool) {
	if s == "" || s[0] < '0' || s[0] > '9' {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil || n == 1<<32-1 {
		return 0, false
	}
	return uint32(n), true
}
