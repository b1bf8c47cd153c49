package wire

import (
	"bytes"
	"encoding/json"
	"math/rand"
	"testing"
	"time"
)

func randString(r *rand.Rand) string {
	pieces := []string{"a", "/", "=", " ", "\"", "\\", "<", "&", "\n", "\x00", "\xff", "é", "\u2028", "PATH", "true"}
	s := ""
	for range r.Intn(6) {
		s += pieces[r.Intn(len(pieces))]
	}
	return s
}

func randStrings(r *rand.Rand) []string {
	switch r.Intn(4) {
	case 0:
		return nil
	case 1:
		return []string{}
	}
	ss := make([]string, 1+r.Intn(4))
	for i := range ss {
		ss[i] = randString(r)
	}
	return ss
}

func randTime(r *rand.Rand) time.Time {
	if r.Intn(5) == 0 {
		return time.Time{}
	}
	t := time.Unix(r.Int63n(4e9), r.Int63n(1e9))
	if r.Intn(2) == 0 {
		return t.UTC()
	}
	return t.In(time.FixedZone("z", r.Intn(24*3600)-12*3600))
}

// The exec request and result encode themselves (json_append.go); the
// bytes must be json.Marshal's for any value, which an older init or boxd
// on the other side decodes.
func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	check := func(v any) {
		t.Helper()
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := appendJSON(nil, v)
		if !ok || string(got) != string(want) {
			t.Fatalf("appendJSON(%+v) = %s (ok %v), json.Marshal = %s", v, got, ok, want)
		}
	}
	for i := 0; i < 5000; i++ {
		req := Request{Op: []string{OpExec, OpPing, OpStat, randString(r)}[r.Intn(4)], Path: randString(r), Keep: r.Intn(2) == 0}
		if r.Intn(4) > 0 {
			req.Exec = &ExecRequest{Args: randStrings(r), Env: randStrings(r), Dir: randString(r), Timeout: time.Duration(r.Int63n(2)) * time.Duration(r.Int63()),
				OutputLimit: r.Int63n(3) * r.Int63(), StdinStream: r.Intn(2) == 0, User: randString(r), Combined: r.Intn(2) == 0}
			if r.Intn(2) == 0 {
				req.Exec.Stdin = []byte(randString(r))
			}
		}
		check(req)
		check(&req)
		check(ExecResult{ExitCode: r.Intn(300) - 10, Signal: randString(r), TimedOut: r.Intn(2) == 0, Truncated: r.Intn(2) == 0,
			Started: randTime(r), Ended: randTime(r), UserCPU: time.Duration(r.Int63()), SystemCPU: time.Duration(r.Int63n(1e9)),
			MaxRSS: r.Int63(), ReadBytes: r.Int63n(2) * r.Int63(), WriteBytes: r.Int63n(2) * r.Int63(), PID: r.Intn(3) * r.Intn(1<<22), Lifetime: time.Duration(r.Int63n(3) * r.Int63n(1e10)),
			OOMKilled: r.Intn(2) == 0, Kept: r.Intn(2) == 0})
		res := FileResult{Index: r.Intn(5000), Path: randString(r), Size: r.Int63n(3) * r.Int63(), Code: randString(r), Message: randString(r)}
		check(res)
		check(&res)
	}
	// A struct that embeds a result (a session's) keeps its own fields.
	type withMore struct {
		ExecResult
		More bool `json:"more"`
	}
	if _, ok := appendJSON(nil, withMore{More: true}); ok {
		t.Error("a struct embedding ExecResult was encoded as an ExecResult")
	}
	// A request with op arguments (a RawMessage json.Marshal compacts) and
	// a result with a time json.Marshal refuses are left to json.Marshal.
	if _, ok := appendJSON(nil, Request{Op: "x", Args: json.RawMessage(`{ "a" : 1 }`)}); ok {
		t.Error("a request with Args was encoded by hand")
	}
	if _, ok := appendJSON(nil, ExecResult{Started: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}); ok {
		t.Error("a result json.Marshal refuses was encoded by hand")
	}
}

// WriteJSON's frames decode to the value written, by hand or not.
func TestWriteJSONRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	fw := NewFrameWriter(&buf)
	req := Request{Op: OpExec, Keep: true, Exec: &ExecRequest{Args: []string{"sh", "-c", "echo \"<x>\""}, Stdin: []byte{0, 1, 255}, Timeout: time.Second}}
	if err := fw.WriteJSON(FrameRequest, req); err != nil {
		t.Fatal(err)
	}
	if err := fw.WriteJSON(FrameRequest, Request{Op: "x", Args: json.RawMessage(`{"a": 1}`)}); err != nil {
		t.Fatal(err)
	}
	fr := NewFrameReader(&buf)
	for _, want := range []string{`"stdin":"AAH/"`, `"args":{"a":1}`} {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		var got Request
		if err := json.Unmarshal(f.Payload, &got); err != nil {
			t.Fatalf("%s: %v", f.Payload, err)
		}
		if !json.Valid(f.Payload) || !bytes.Contains(f.Payload, []byte(want)) {
			t.Errorf("frame %s lacks %s", f.Payload, want)
		}
	}
}
