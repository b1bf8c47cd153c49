package jsonline

import (
	"encoding/json"
	"math/rand"
	"testing"
	"time"
)

// hostile draws strings from the bytes that need escaping (controls,
// quotes, backslash, HTML characters, U+2028, invalid UTF-8) and plain ones.
func hostile(r *rand.Rand) string {
	pieces := []string{"a", "Z", "0", " ", "~", "\"", "\\", "<", ">", "&", "\n", "\t", "\x00", "\x1f", "\x7f",
		"\xff", "\xc3", "é", "\u2028", "\u2029", "日本", "\U0001F600", "/", "'", "}"}
	n := r.Intn(12)
	s := ""
	for range n {
		s += pieces[r.Intn(len(pieces))]
	}
	return s
}

func TestStringMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 20000; i++ {
		s := hostile(r)
		want, _ := json.Marshal(s)
		if got := String(nil, s); string(got) != string(want) {
			t.Fatalf("String(%q) = %s, json.Marshal = %s", s, got, want)
		}
	}
}

func TestStringMapMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	for i := 0; i < 5000; i++ {
		m := map[string]string{}
		for range r.Intn(5) {
			m[hostile(r)] = hostile(r)
		}
		want, _ := json.Marshal(m)
		if got := StringMap(nil, m); string(got) != string(want) {
			t.Fatalf("StringMap(%q) = %s, json.Marshal = %s", m, got, want)
		}
	}
}

func TestTimeMatchesEncodingJSON(t *testing.T) {
	zone := time.FixedZone("x", -(3*3600 + 30*60))
	for _, tm := range []time.Time{
		time.Now(), time.Now().UTC(), time.Now().In(zone), time.Unix(0, 0).UTC(), {},
		time.Date(2026, 11, 26, 4, 41, 31, 0, time.UTC), time.Date(2026, 11, 26, 4, 41, 31, 120000000, zone),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
	} {
		want, err := json.Marshal(tm)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := Time(nil, tm)
		if !ok || string(got) != string(want) {
			t.Errorf("Time(%v) = %s, %v; json.Marshal = %s", tm, got, ok, want)
		}
	}
	// Years json.Marshal refuses are refused, so callers fall back to it.
	for _, y := range []int{-1, 10000} {
		if _, ok := Time(nil, time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC)); ok {
			t.Errorf("Time accepted year %d, which json.Marshal refuses", y)
		}
	}
}

func TestKeyAndNumbers(t *testing.T) {
	b := append([]byte(nil), '{')
	b = Key(b, "a")
	b = Int(b, -12)
	b = Key(b, "b")
	b = Uint(b, 1<<63)
	b = Key(b, "c\"<")
	b = String(b, "x")
	b = append(b, '}')
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	want := `{"a":-12,"b":9223372036854775808,"c\"\u003c":"x"}`
	if string(b) != want {
		t.Fatalf("got %s, want %s", b, want)
	}
}

// OmitEmpty writes what json.Marshal writes for a string field tagged
// omitempty, set and unset.
func TestOmitEmptyMatchesEncodingJSON(t *testing.T) {
	type v struct {
		A int    `json:"a"`
		S string `json:"s,omitempty"`
	}
	for _, s := range []string{"", "x", "<&\"\n"} {
		want, _ := json.Marshal(v{S: s})
		got := append(OmitEmpty(Int(Key([]byte("{"), "a"), 0), "s", s), '}')
		if string(got) != string(want) {
			t.Errorf("%q: got %s, want %s", s, got, want)
		}
	}
}
