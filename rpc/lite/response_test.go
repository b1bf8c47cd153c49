//go:build linux

package lite

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"

	"google.golang.org/protobuf/encoding/protojson"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

func envelope(flags byte, payload string) string {
	n := len(payload)
	return string([]byte{flags, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}) + payload
}

const head = "HTTP/1.1 200 OK\r\nContent-Type: application/connect+json\r\nTransfer-Encoding: chunked\r\n\r\n"

// chunked frames body in chunks of size n (the last may be shorter) and
// the last chunk.
func chunked(body string, n int) string {
	var b strings.Builder
	for len(body) > 0 {
		c := body[:min(n, len(body))]
		body = body[len(c):]
		fmt.Fprintf(&b, "%x\r\n%s\r\n", len(c), c)
	}
	return b.String() + "0\r\n\r\n"
}

var end = envelope(2, "{}")

type outcome struct {
	stdout, stderr string
	result         *Result
	err            string // Error() of the error, "" for none
	errType        string
}

func (o outcome) equal(p outcome) bool {
	return o.stdout == p.stdout && o.stderr == p.stderr && o.err == p.err && o.errType == p.errType &&
		(o.result == nil) == (p.result == nil) && (o.result == nil || *o.result == *p.result)
}

func run(r io.Reader) outcome {
	var stdout, stderr bytes.Buffer
	res, err := ReadResponse(r, &stdout, &stderr)
	o := outcome{stdout: stdout.String(), stderr: stderr.String(), result: res}
	if err != nil {
		o.err, o.errType = err.Error(), fmt.Sprintf("%T", err)
	}
	return o
}

// TestReadResponse: framings, events and each way a stream can break, with
// the words connect-go uses for the breaks, except a connection cut
// mid-answer: unavailable, as apiwire says.
func TestReadResponse(t *testing.T) {
	ok := &Result{}
	long := envelope(0, `{"result":{"signal":"SIGKILLSIGKILL"}}`)
	cases := []struct {
		name string
		in   string
		want outcome
	}{
		{"chunked", head + chunked(envelope(0, `{"stdout":"aGk="}`)+envelope(0, `{"result":{"exitCode":7}}`)+end, 1<<20),
			outcome{stdout: "hi", result: &Result{ExitCode: 7}}},
		{"tiny chunks", head + chunked(envelope(0, `{"stderr":"aGk="}`)+envelope(0, `{"result":{}}`)+end, 1),
			outcome{stderr: "hi", result: ok}},
		{"chunk extensions, upper hex, trailers", head + "6;x=y\r\n" + long[:6] + fmt.Sprintf("\r\n%X \r\n", len(long)-6) + long[6:] + "\r\n7\r\n" + end + "\r\n0\r\nX-T: 1\r\n\r\n",
			outcome{result: &Result{Signal: "SIGKILLSIGKILL"}}},
		{"content length", "HTTP/1.1 200 OK\r\ncontent-type: application/connect+json\r\nContent-Length: " + strconv.Itoa(len(envelope(0, `{"result":{}}`)+end)) + "\r\n\r\n" + envelope(0, `{"result":{}}`) + end,
			outcome{result: ok}},
		{"until EOF", "HTTP/1.0 200 OK\r\nContent-Type: application/connect+json\r\n\r\n" + envelope(0, `{"result":{"truncated":true}}`) + end,
			outcome{result: &Result{Truncated: true}}},
		{"LF line ends", "HTTP/1.1 200 OK\nContent-Type: application/connect+json\nTransfer-Encoding: chunked\n\n" + strings.ReplaceAll(chunked(end, 100), "\r\n", "\n"),
			outcome{}},
		{"proto names, nulls, unknown fields, empty message", head + chunked(envelope(0, "")+envelope(0, `{"stdout":null,"x":[1,{"y":null}],"stderr":"-_8","result":null}`)+envelope(0, ` { "result" : { "exit_code" : "3", "timed_out" : false, "signal":"SIG\u004bILL", "maxRssBytes":"12", "new":{} } } `)+end, 7),
			outcome{stderr: "\xfb\xff", result: &Result{ExitCode: 3, Signal: "SIGKILL"}}},
		{"last result wins, output after it kept", head + chunked(envelope(0, `{"result":{"exitCode":1}}`)+envelope(0, `{"stdout":"eA=="}`)+envelope(0, `{"result":{"exitCode":2}}`)+end, 5),
			outcome{stdout: "x", result: &Result{ExitCode: 2}}},
		{"end with error", head + chunked(envelope(0, `{"stdout":"eA"}`)+envelope(2, `{"error":{"code":"not_found","message":"sandbox \"a\" not found \u003c\ud83d\ude00\ud800","details":[{"type":"x","value":""}]},"metadata":{"a":["b"]}}`), 3),
			outcome{stdout: "x", err: "not_found: sandbox \"a\" not found <\U0001F600\uFFFD", errType: "*lite.Error"}},
		{"unknown code", head + chunked(envelope(2, `{"error":{"code":"teapot","message":"m"}}`), 64),
			outcome{err: "unknown: m", errType: "*lite.Error"}},
		{"error keys in any case", head + chunked(envelope(2, `{"ERROR":{"Code":"aborted","MESSAGE":"m"}}`), 64),
			outcome{err: "aborted: m", errType: "*lite.Error"}},
		{"null error", head + chunked(envelope(2, `{"error":null}`), 64), outcome{}},
		{"no end message", head + chunked(envelope(0, `{"stdout":"eA=="}`), 64),
			outcome{stdout: "x", err: "internal: protocol error: unexpected EOF", errType: "*lite.Error"}},
		{"cut in an envelope prefix", head + chunked(envelope(0, `{}`)[:3], 64),
			outcome{err: "invalid_argument: protocol error: incomplete envelope: unexpected EOF", errType: "*lite.Error"}},
		{"cut in a message", head + chunked(envelope(0, `{"stdout":"eA=="}`)[:9], 64),
			outcome{err: "invalid_argument: protocol error: promised 17 bytes in enveloped message, got 4 bytes", errType: "*lite.Error"}},
		{"connection cut in a chunk", head + "20\r\n" + envelope(0, `{}`)[:4],
			outcome{err: "unavailable: connection to boxd lost mid-call: unexpected EOF", errType: "*lite.Error"}},
		{"connection cut in a message", head + "20\r\n" + envelope(0, `{"stdout":"eA=="}`)[:9],
			outcome{err: "unavailable: connection to boxd lost mid-call: unexpected EOF", errType: "*lite.Error"}},
		{"connection cut between chunks", head + "5\r\n" + envelope(0, "") + "\r\n",
			outcome{err: "unavailable: connection to boxd lost mid-call: unexpected EOF", errType: "*lite.Error"}},
		{"connection cut after the end message", head + "7\r\n" + end,
			outcome{err: "internal: corrupt response: I/O error after end-stream message: unexpected EOF", errType: "*lite.Error"}},
		{"too large", head + chunked("\x00\x00\x80\x00\x01"+strings.Repeat(" ", 1<<23+1)+end, 1<<20),
			outcome{err: "resource_exhausted: message size 8388609 is larger than configured max 8388608", errType: "*lite.Error"}},
		{"compressed", head + chunked(envelope(1, `{}`)+end, 64),
			outcome{err: "internal: protocol error: sent compressed message without compression support", errType: "*lite.Error"}},
		{"bytes after the end", head + chunked(end+"xyz", 64),
			outcome{err: "internal: corrupt response: 3 extra bytes after end of stream", errType: "*lite.Error"}},
		{"bad flags", head + chunked(envelope(4, `{}`), 64),
			outcome{err: "internal: protocol error: invalid envelope flags 4", errType: "*lite.Error"}},
		{"bad end message", head + chunked(envelope(2, `{"error":`), 64),
			outcome{err: "internal: unmarshal end stream message: invalid JSON", errType: "*lite.Error"}},
		{"oneof twice", head + chunked(envelope(0, `{"stdout":"","stderr":""}`)+end, 64),
			outcome{err: "invalid_argument: unmarshal message: oneof boxd.v1.ExecStreamResponse.event is already set", errType: "*lite.Error"}},
		{"field twice", head + chunked(envelope(0, `{"result":{"exitCode":1,"exit_code":1}}`)+end, 64),
			outcome{err: "invalid_argument: unmarshal message: duplicate field", errType: "*lite.Error"}},
		{"bad base64", head + chunked(envelope(0, `{"stdout":"!!!!"}`)+end, 64),
			outcome{err: "invalid_argument: unmarshal message: illegal base64 data at input byte 0", errType: "*lite.Error"}},
		{"nothing", "", outcome{err: "unavailable: unexpected EOF", errType: "*lite.Error"}},
		{"cut in the head", "HTTP/1.1 200 OK\r\nContent-Ty", outcome{err: "unavailable: unexpected EOF", errType: "*lite.Error"}},
		{"HTTP error", "HTTP/1.1 415 Unsupported Media Type\r\n\r\n", outcome{err: "read response: HTTP status 415 Unsupported Media Type", errType: "*lite.NotServedError"}},
		{"not HTTP", "SSH-2.0-OpenSSH\r\n", outcome{err: "read response: malformed HTTP response", errType: "*lite.NotServedError"}},
		{"other content type", "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{}", outcome{err: `read response: content type "application/json"`, errType: "*lite.NotServedError"}},
		{"bad chunk size", head + "zz\r\n", outcome{err: "invalid_argument: protocol error: incomplete envelope: malformed HTTP response", errType: "*lite.Error"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, r := range []io.Reader{strings.NewReader(tc.in), iotest.OneByteReader(strings.NewReader(tc.in)), iotest.HalfReader(strings.NewReader(tc.in))} {
				if got := run(r); !got.equal(tc.want) {
					t.Fatalf("got %+v (result %+v)\nwant %+v (result %+v)", got, got.result, tc.want, tc.want.result)
				}
			}
		})
	}
}

// TestConnectionReset: a connection reset mid-answer (boxd killed with
// unread input) is unavailable too.
func TestConnectionReset(t *testing.T) {
	in := head + chunked(envelope(0, `{"stdout":"eA=="}`), 64)
	r := io.MultiReader(strings.NewReader(in[:len(in)-5]), iotest.ErrReader(syscall.ECONNRESET))
	want := outcome{stdout: "x", err: "unavailable: connection to boxd lost mid-call: connection reset by peer", errType: "*lite.Error"}
	if got := run(r); !got.equal(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

// TestStdoutWriteError: a failed stdout write ends the call with that error;
// stderr's are ignored.
func TestStdoutWriteError(t *testing.T) {
	in := head + chunked(envelope(0, `{"stderr":"eA=="}`)+envelope(0, `{"stdout":"eA=="}`)+envelope(0, `{"result":{}}`)+end, 64)
	werr := errors.New("disk full")
	_, err := ReadResponse(strings.NewReader(in), errWriter{werr}, errWriter{errors.New("ignored")})
	if err != werr {
		t.Fatalf("err %v, want %v", err, werr)
	}
}

type errWriter struct{ err error }

func (w errWriter) Write([]byte) (int, error) { return 0, w.err }

// FuzzReadResponse: any input reads the same whatever the read sizes, and
// never panics.
func FuzzReadResponse(f *testing.F) {
	f.Add(head + chunked(envelope(0, `{"stdout":"aGk="}`)+envelope(0, `{"result":{"exitCode":7}}`)+end, 9))
	f.Add(head + chunked(envelope(2, `{"error":{"code":"not_found","message":"m"}}`), 64))
	f.Add("HTTP/1.1 200 OK\r\nContent-Type: application/connect+json\r\nContent-Length: 12\r\n\r\n" + envelope(0, `{"stdout":"eA=="}`))
	f.Fuzz(func(t *testing.T, in string) {
		whole := run(strings.NewReader(in))
		bytewise := run(iotest.OneByteReader(strings.NewReader(in)))
		if !whole.equal(bytewise) {
			t.Fatalf("whole %+v\nbytewise %+v", whole, bytewise)
		}
	})
}

// FuzzParseEvent compares parseEvent with protojson, which the full CLI's
// codec is: where both read a message they read the same. (parseEvent
// checks less in fields boxctl does not use, and takes only plain integers
// for the exit code, which is all boxd sends.) Messages protojson writes
// must always parse.
func FuzzParseEvent(f *testing.F) {
	for _, m := range []*boxdv1.ExecStreamResponse{
		stdoutEv("hello\x00\xff"), stderrEv(""), stderrEv("x"),
		resultEv(&boxdv1.ExecResult{ExitCode: -129, Signal: "SIGTERM", TimedOut: true, Truncated: true, StartedAt: "t", UserCpuUsec: -1, MaxRssBytes: 1 << 50}),
		resultEv(&boxdv1.ExecResult{}), {},
	} {
		b, err := protojson.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		b, _ = protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}.Marshal(m)
		f.Add(b)
	}
	f.Add([]byte(`{"stdout":"-_-_","unknown":{"a":[1,2,{"b":"\u00e9"}]}}`))
	f.Add([]byte(`{"result":{"exitCode":"12","signal":null}}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		var want boxdv1.ExecStreamResponse
		oracleErr := protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(in, &want)
		ev, err := parseEvent(in, nil)
		if oracleErr != nil || err != nil {
			return
		}
		switch e := want.Event.(type) {
		case *boxdv1.ExecStreamResponse_Stdout:
			if ev.kind != eventStdout || !bytes.Equal(ev.data, e.Stdout) {
				t.Fatalf("stdout %q kind %d, want %q", ev.data, ev.kind, e.Stdout)
			}
		case *boxdv1.ExecStreamResponse_Stderr:
			if ev.kind != eventStderr || !bytes.Equal(ev.data, e.Stderr) {
				t.Fatalf("stderr %q kind %d, want %q", ev.data, ev.kind, e.Stderr)
			}
		case *boxdv1.ExecStreamResponse_Result:
			r := e.Result
			if ev.kind != eventResult || *ev.result != (Result{ExitCode: r.ExitCode, Signal: r.Signal, TimedOut: r.TimedOut, Truncated: r.Truncated, OOMKilled: r.OomKilled}) {
				t.Fatalf("result %+v kind %d, want %v", ev.result, ev.kind, r)
			}
		case nil:
			if ev.kind != eventNone {
				t.Fatalf("kind %d for no event", ev.kind)
			}
		}
	})
}

// FuzzUnquote: JSON strings read as encoding/json reads them.
func FuzzUnquote(f *testing.F) {
	for _, s := range []string{`"plain"`, `"\ud83d\ude00"`, `"\ud800x"`, `"\udc00\ud800"`, `"\u00e9\n\"\\\/\b\f\r\t"`, "\"\xff\xc3\"", `"\ud800\u0041"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var want string
		oracleErr := json.Unmarshal(in, &want)
		s := &scanner{b: in}
		got, err := s.str()
		if err == nil && !s.end() {
			err = errSyntax
		}
		if (err == nil) != (oracleErr == nil) {
			t.Fatalf("%q: error %v, encoding/json's %v", in, err, oracleErr)
		}
		if err == nil && got != want {
			t.Fatalf("%q: %q, encoding/json %q", in, got, want)
		}
	})
}

// wireError and endStream replicate how connect-go decodes the end of a
// stream (its types are unexported), the oracle for FuzzEndStream.
type wireError struct{ code, message string }

func (e *wireError) UnmarshalJSON(b []byte) error {
	var w struct {
		Code    string            `json:"code"`
		Message string            `json:"message"`
		Details []json.RawMessage `json:"details"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	e.message = w.Message
	if c := connectCode(w.Code); c != "" {
		e.code = c
	}
	return nil
}

type endStream struct {
	Error   *wireError          `json:"error,omitempty"`
	Trailer map[string][]string `json:"metadata,omitempty"`
}

// FuzzEndStream: where connect-go reads an end-of-stream message,
// parseEndStream reads the same error.
func FuzzEndStream(f *testing.F) {
	for _, s := range []string{`{}`, `null`, `{"error":{"code":"not_found","message":"m"}}`, `{"Error":{"CODE":"bogus"},"error":{"message":"x"}}`,
		`{"error":null,"metadata":{"a":["b"]}}`, `{"error":{"code":"internal"},"error":{"code":"nope"}}`, `{"error":{"details":[{}],"code":null}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var want endStream
		if json.Unmarshal(in, &want) != nil {
			return
		}
		got, err := parseEndStream(in)
		if err != nil {
			t.Fatalf("%q: %v; encoding/json reads it", in, err)
		}
		switch {
		case want.Error == nil && got == nil:
		case want.Error == nil || got == nil:
			t.Fatalf("%q: error %+v, want %+v", in, got, want.Error)
		default:
			code := want.Error.code
			if code == "" {
				code = "unknown"
			}
			if got.Code != code || got.Message != want.Error.message {
				t.Fatalf("%q: error %+v, want %q %q", in, got, code, want.Error.message)
			}
		}
	})
}

// TestParseEventProtojson: whatever protojson writes for an event, in any of
// its layouts, parses to the same event.
func TestParseEventProtojson(t *testing.T) {
	data := make([]byte, 3000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	msgs := []*boxdv1.ExecStreamResponse{{}, stdoutEv(""), stderrEv("\n")}
	for n := 1; n < len(data); n = n*2 + 1 {
		msgs = append(msgs, stdoutEv(string(data[:n])), stderrEv(string(data[n/2:n])))
	}
	for _, code := range []int32{0, 1, 124, 137, 255, -1, 1<<31 - 1, -1 << 31} {
		msgs = append(msgs, resultEv(&boxdv1.ExecResult{ExitCode: code, Signal: "SIGKILL", TimedOut: code%2 == 0, Truncated: code%3 == 0, OomKilled: code%5 == 0,
			StartedAt: "2026-11-22T14:00:00.123456789Z", UserCpuUsec: int64(code) << 20, SystemCpuUsec: 1, MaxRssBytes: 1 << 40}))
	}
	opts := []protojson.MarshalOptions{{}, {UseProtoNames: true, EmitUnpopulated: true}, {Multiline: true, Indent: "\t"}}
	for _, m := range msgs {
		for _, o := range opts {
			b, err := o.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			ev, err := parseEvent(b, nil)
			if err != nil {
				t.Fatalf("%s: %v", b, err)
			}
			switch e := m.Event.(type) {
			case *boxdv1.ExecStreamResponse_Stdout:
				if ev.kind != eventStdout || !bytes.Equal(ev.data, e.Stdout) {
					t.Fatalf("%s: stdout %q", b, ev.data)
				}
			case *boxdv1.ExecStreamResponse_Stderr:
				if ev.kind != eventStderr || !bytes.Equal(ev.data, e.Stderr) {
					t.Fatalf("%s: stderr %q", b, ev.data)
				}
			case *boxdv1.ExecStreamResponse_Result:
				r := e.Result
				if ev.kind != eventResult || *ev.result != (Result{ExitCode: r.ExitCode, Signal: r.Signal, TimedOut: r.TimedOut, Truncated: r.Truncated, OOMKilled: r.OomKilled}) {
					t.Fatalf("%s: result %+v", b, ev.result)
				}
			default:
				if ev.kind != eventNone {
					t.Fatalf("%s: kind %d", b, ev.kind)
				}
			}
		}
	}
}
