// Package jsonline appends the JSON of the few values boxd's per-call log
// lines hold (the events file and the audit log, written on every exec),
// without encoding/json's reflection: on this kind of host a cold
// json.Marshal of one such line costs 10-30 µs, several times the append.
// The output is byte for byte what json.Marshal writes; a string that
// needs escaping is handed to json.Marshal, so the escaping rules stay
// encoding/json's.
package jsonline

import (
	"encoding/json"
	"sort"
	"strconv"
	"time"
)

// String appends s as a JSON string.
func String(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // never fails for a string
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// Key appends "name": after a comma if b does not end an opening brace.
func Key(b []byte, name string) []byte {
	if n := len(b); n > 0 && b[n-1] != '{' {
		b = append(b, ',')
	}
	b = String(b, name)
	return append(b, ':')
}

// OmitEmpty appends "name":s unless s is empty, as json.Marshal does for a
// string field tagged omitempty.
func OmitEmpty(b []byte, name, s string) []byte {
	if s == "" {
		return b
	}
	return String(Key(b, name), s)
}

// Time appends t as json.Marshal does (RFC 3339 with nanoseconds); ok is
// false for a year json.Marshal refuses (outside 0-9999).
func Time(b []byte, t time.Time) (_ []byte, ok bool) {
	if y := t.Year(); y < 0 || y > 9999 {
		return b, false
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), true
}

// Int appends n.
func Int(b []byte, n int64) []byte { return strconv.AppendInt(b, n, 10) }

// Uint appends n.
func Uint(b []byte, n uint64) []byte { return strconv.AppendUint(b, n, 10) }

// StringMap appends m as an object with its keys sorted (as json.Marshal).
func StringMap(b []byte, m map[string]string) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b = append(b, '{')
	for _, k := range keys {
		b = Key(b, k)
		b = String(b, m[k])
	}
	return append(b, '}')
}
