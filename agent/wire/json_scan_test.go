package wire

import (
	"bytes"
	"encoding/json"
	"math/rand"
	"testing"
	"time"
)

// sameDecode holds DecodeDownloadMark to json.Unmarshal's answer for b:
// both fail or both give values that marshal to the same bytes (a time's
// zone is a fresh *Location per parse, so the values themselves are
// compared through their JSON).
func sameDecode(t *testing.T, b []byte) (fast bool) {
	t.Helper()
	var got, want DownloadMark
	gerr := DecodeDownloadMark(b, &got)
	werr := json.Unmarshal(b, &want)
	if (gerr == nil) != (werr == nil) {
		t.Fatalf("%q: DecodeDownloadMark error %v, json.Unmarshal error %v", b, gerr, werr)
	}
	if gerr != nil {
		return false
	}
	gj, err1 := json.Marshal(got)
	wj, err2 := json.Marshal(want)
	if (err1 == nil) != (err2 == nil) || !bytes.Equal(gj, wj) {
		t.Fatalf("%q: DecodeDownloadMark gave %s (%v), json.Unmarshal %s (%v)", b, gj, err1, wj, err2)
	}
	if !markMtime(got).Equal(markMtime(want)) {
		t.Fatalf("%q: mtime %v, json.Unmarshal %v", b, markMtime(got), markMtime(want))
	}
	_, fast = scanDownloadMark(b)
	return fast
}

// markMtime is m's start's mtime, or the zero time.
func markMtime(m DownloadMark) time.Time {
	if m.Start == nil {
		return time.Time{}
	}
	return m.Start.Mtime
}

// Every mark the init writes decodes as json.Unmarshal decodes it, and
// the plain ones (what a download's marks are) take the fast path.
func TestDecodeDownloadMarkMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	fastSeen := 0
	for i := 0; i < 5000; i++ {
		mark := DownloadMark{Index: r.Intn(5000)}
		switch r.Intn(3) {
		case 0:
			mark.Start = &FileStat{Path: randString(r), Name: randString(r), Type: randString(r), Size: r.Int63(), Mode: r.Uint32() & 07777,
				UID: r.Uint32(), GID: r.Uint32(), Mtime: randTime(r)}
			if r.Intn(2) == 0 {
				mark.Start.LinkTarget, mark.Start.Error = randString(r), randString(r)
			}
		case 1:
			mark.Done = &FileResult{Index: r.Intn(5000), Path: randString(r), Size: r.Int63n(3) * r.Int63(), Code: randString(r), Message: randString(r)}
		}
		b, ok := appendDownloadMark(nil, &mark)
		if !ok {
			t.Fatal("appendDownloadMark refused a mark")
		}
		if sameDecode(t, b) {
			fastSeen++
		}
	}
	plain := []DownloadMark{
		{Index: 7, Start: &FileStat{Path: "/workspace/d00/s1/f3.txt", Name: "f3.txt", Type: "file", Size: 4096, Mode: 0o644, UID: 1000, GID: 1000,
			Mtime: time.Date(2026, 11, 26, 7, 0, 0, 123456789, time.UTC)}},
		{Index: 7, Done: &FileResult{Index: 7, Path: "/workspace/d00/s1/f3.txt", Size: 4096}},
		{Index: 0, Done: &FileResult{Path: "/x", Code: "not_found", Message: "no such file"}},
		{Index: 2, Start: &FileStat{Path: "/l", Name: "l", Type: "symlink", Mtime: time.Unix(1, 0).In(time.FixedZone("", -3600)), LinkTarget: "t", Error: "e"}},
	}
	for _, m := range plain {
		b, _ := appendDownloadMark(nil, &m)
		if !sameDecode(t, b) {
			t.Errorf("%s did not take the fast path", b)
		}
	}
	if fastSeen == 0 {
		t.Error("no random mark took the fast path")
	}
}

// What a hostile init might send instead: each decodes as json.Unmarshal
// decodes it (most by falling back to it), never to something else.
func TestDecodeDownloadMarkHostile(t *testing.T) {
	for _, s := range []string{
		``, `{`, `}`, `null`, `[]`, `{}`, `{"index":1}`, `{"index":1,}`, `{"index":01}`, `{"index":-0}`, `{"index":-1}`,
		`{"index":1e2}`, `{"index":1.0}`, `{"index":99999999999999999999}`, `{"index":"1"}`, `{"index":1} `, ` {"index":1}`,
		`{"index":1}x`, `{"index":1,"index":2}`, `{"Index":1}`, `{"index":1,"start":null}`, `{"index":1,"done":null}`,
		`{"index":1,"start":{},"done":{}}`, `{"index":1,"done":{"index":1,"path":"a","size":1},"start":{}}`,
		`{"index":1,"done":{"index":1,"path":"a\u0000","size":1}}`, `{"index":1,"done":{"index":1,"path":"\xff","size":1}}`,
		`{"index":1,"done":{"index":1,"path":"a","size":-1}}`, `{"index":1,"done":{"index":1,"path":"a","size":1,"code":"x","message":"y"}}`,
		`{"index":1,"done":{"index":1,"path":"a","size":1,"message":"y","code":"x"}}`,
		`{"index":1,"start":{"path":"a","name":"a","type":"file","size":1,"mode":-1,"uid":0,"gid":0,"mtime":"2026-01-01T00:00:00Z"}}`,
		`{"index":1,"start":{"path":"a","name":"a","type":"file","size":1,"mode":4294967296,"uid":0,"gid":0,"mtime":"2026-01-01T00:00:00Z"}}`,
		`{"index":1,"start":{"path":"a","name":"a","type":"file","size":1,"mode":1,"uid":0,"gid":0,"mtime":"not a time"}}`,
		`{"index":1,"start":{"path":"a","name":"a","type":"file","size":1,"mode":1,"uid":0,"gid":0,"mtime":"2026-13-01T00:00:00Z"}}`,
		`{"index":1,"start":{"path":"a","name":"a","type":"file","size":1,"mode":1,"uid":0,"gid":0,"mtime":"2026-01-01T00:00:00+25:00"}}`,
		`{"index":1,"start":{"path":"a","name":"a","type":"file","size":1,"mode":1,"uid":0,"gid":0,"mtime":"2026-01-01T00:00:00Z","link_target":"b","error":"c"}}`,
		`{"index":1,"start":{"path":"a","name":"a","type":"file","size":1,"mode":1,"uid":0,"gid":0}}`,
		`{"index":1,"start":{"path":"a","name":"a","type":"file","size":1,"mode":1,"uid":0,"gid":0,"mtime":"2026-01-01T00:00:00Z","extra":1}}`,
	} {
		sameDecode(t, []byte(s))
	}
}

func FuzzDecodeDownloadMark(f *testing.F) {
	f.Add([]byte(`{"index":7,"start":{"path":"/w/f","name":"f","type":"file","size":4096,"mode":420,"uid":1000,"gid":1000,"mtime":"2026-11-26T07:00:00.123456789Z"}}`))
	f.Add([]byte(`{"index":7,"done":{"index":7,"path":"/w/f","size":4096}}`))
	f.Add([]byte(`{"index":0,"done":{"index":0,"path":"/x","size":0,"code":"not_found","message":"no such file"}}`))
	f.Add([]byte(`{"index":2,"start":{"path":"/l","name":"l","type":"symlink","size":0,"mode":0,"uid":0,"gid":0,"mtime":"1970-01-01T00:00:01-01:00","link_target":"t","error":"e"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		sameDecode(t, b)
	})
}
