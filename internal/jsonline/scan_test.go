package jsonline

import (
	"math"
	"testing"
)

// The scanner takes what this package appends and refuses the rest, so its
// users fall back to encoding/json.
func TestScannerReadsOnlyItsOwnForm(t *testing.T) {
	read := func(b []byte) (int64, uint64, string, bool) {
		s := NewScanner(b)
		s.Open()
		s.Need("a")
		a := s.Int(64)
		var u uint64
		if s.Field("u") {
			u = s.Uint(32)
		}
		s.Need("s")
		str := s.String()
		s.Close()
		return a, u, str, s.Ok()
	}
	// What the package appends.
	b := append(Key(append(Key([]byte("{"), "a"), '-', '7'), "u"), "4294967295"...)
	b = append(String(Key(b, "s"), "plain text/path"), '}')
	if a, u, str, ok := read(b); !ok || a != -7 || u != math.MaxUint32 || str != "plain text/path" {
		t.Fatalf("%s: %d %d %q %v", b, a, u, str, ok)
	}
	if _, _, _, ok := read([]byte(`{"a":0,"s":""}`)); !ok {
		t.Error("an optional field left out was refused")
	}
	for _, in := range []string{
		``, `{"a":1,"s":"x"}x`, ` {"a":1,"s":"x"}`, `{"a":1 ,"s":"x"}`, `{"a":01,"s":"x"}`, `{"a":-0,"s":"x"}`, `{"a":1.5,"s":"x"}`,
		`{"a":1e3,"s":"x"}`, `{"a":-,"s":"x"}`, `{"a":9223372036854775808,"s":"x"}`, `{"a":1,"u":4294967296,"s":"x"}`, `{"a":1,"u":-1,"s":"x"}`,
		`{"a":1,"s":"\u0041"}`, `{"a":1,"s":"a\"b"}`, "{\"a\":1,\"s\":\"\x01\"}", "{\"a\":1,\"s\":\"\xc3\xa9\"}", `{"a":1,"s":"x}`,
		`{"s":"x","a":1}`, `{"a":1,"a":2,"s":"x"}`, `{"A":1,"s":"x"}`, `{"a":1,"s":null}`, `{"a":"1","s":"x"}`,
	} {
		if _, _, _, ok := read([]byte(in)); ok {
			t.Errorf("%q was taken", in)
		}
	}
}
