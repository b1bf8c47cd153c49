package wire

import (
	"encoding/base64"

	"github.com/boxd-dev/boxd/internal/jsonline"
)

// The exec request and its result cross the channel on every exec, and an
// upload's result once per file; a cold json.Marshal of one costs tens
// of µs on this kind of host, a warm one several: they are appended by hand
// (jsonline) to the same bytes json.Marshal writes, which
// TestAppendJSONMatchesEncodingJSON checks. Decoding stays encoding/json's:
// it reads what the other side sent, which may be hostile.

// appendJSON appends v's JSON if v is a Request or an ExecResult (exactly:
// not a struct that embeds one, whose other fields would be lost, so these
// are functions and not methods, which embedding would promote); ok false
// means WriteJSON must use json.Marshal.
func appendJSON(b []byte, v any) (_ []byte, ok bool) {
	switch x := v.(type) {
	case Request:
		return appendRequest(b, &x)
	case *Request:
		return appendRequest(b, x)
	case ExecResult:
		return appendResult(b, &x)
	case *ExecResult:
		return appendResult(b, x)
	case FileResult:
		return appendFileResult(b, &x), true
	case *FileResult:
		return appendFileResult(b, x), true
	}
	return b, false
}

// An upload sends one of these per file.
func appendFileResult(b []byte, r *FileResult) []byte {
	b = append(b, '{')
	b = jsonline.Key(b, "index")
	b = jsonline.Int(b, int64(r.Index))
	b = jsonline.Key(b, "path")
	b = jsonline.String(b, r.Path)
	b = jsonline.Key(b, "size")
	b = jsonline.Int(b, r.Size)
	b = jsonline.OmitEmpty(b, "code", r.Code)
	b = jsonline.OmitEmpty(b, "message", r.Message)
	return append(b, '}')
}

func appendRequest(b []byte, r *Request) ([]byte, bool) {
	if r.Args != nil { // json.Marshal compacts a RawMessage
		return b, false
	}
	b = append(b, '{')
	b = jsonline.Key(b, "op")
	b = jsonline.String(b, r.Op)
	if r.Exec != nil {
		b = jsonline.Key(b, "exec")
		b = appendExecRequest(b, r.Exec)
	}
	b = jsonline.OmitEmpty(b, "path", r.Path)
	if r.Keep {
		b = jsonline.Key(b, "keep")
		b = append(b, "true"...)
	}
	return append(b, '}'), true
}

func appendExecRequest(b []byte, e *ExecRequest) []byte {
	b = append(b, '{')
	b = jsonline.Key(b, "args")
	b = appendStrings(b, e.Args)
	if len(e.Env) > 0 {
		b = jsonline.Key(b, "env")
		b = appendStrings(b, e.Env)
	}
	b = jsonline.OmitEmpty(b, "dir", e.Dir)
	if e.Timeout != 0 {
		b = jsonline.Key(b, "timeout")
		b = jsonline.Int(b, int64(e.Timeout))
	}
	if len(e.Stdin) > 0 {
		b = jsonline.Key(b, "stdin")
		b = append(b, '"')
		b = base64.StdEncoding.AppendEncode(b, e.Stdin)
		b = append(b, '"')
	}
	if e.OutputLimit != 0 {
		b = jsonline.Key(b, "output_limit")
		b = jsonline.Int(b, e.OutputLimit)
	}
	if e.StdinStream {
		b = jsonline.Key(b, "stdin_stream")
		b = append(b, "true"...)
	}
	b = jsonline.OmitEmpty(b, "user", e.User)
	if e.Combined {
		b = jsonline.Key(b, "combined")
		b = append(b, "true"...)
	}
	if e.ReportStart {
		b = jsonline.Key(b, "report_start")
		b = append(b, "true"...)
	}
	return append(b, '}')
}

func appendResult(b []byte, r *ExecResult) ([]byte, bool) {
	b = append(b, '{')
	b = jsonline.Key(b, "exit_code")
	b = jsonline.Int(b, int64(r.ExitCode))
	b = jsonline.OmitEmpty(b, "signal", r.Signal)
	if r.TimedOut {
		b = jsonline.Key(b, "timed_out")
		b = append(b, "true"...)
	}
	if r.Truncated {
		b = jsonline.Key(b, "truncated")
		b = append(b, "true"...)
	}
	var ok bool
	b = jsonline.Key(b, "started")
	if b, ok = jsonline.Time(b, r.Started); !ok {
		return b, false
	}
	b = jsonline.Key(b, "ended")
	if b, ok = jsonline.Time(b, r.Ended); !ok {
		return b, false
	}
	b = jsonline.Key(b, "user_cpu")
	b = jsonline.Int(b, int64(r.UserCPU))
	b = jsonline.Key(b, "system_cpu")
	b = jsonline.Int(b, int64(r.SystemCPU))
	b = jsonline.Key(b, "max_rss")
	b = jsonline.Int(b, r.MaxRSS)
	if r.ReadBytes != 0 {
		b = jsonline.Key(b, "read_bytes")
		b = jsonline.Int(b, r.ReadBytes)
	}
	if r.WriteBytes != 0 {
		b = jsonline.Key(b, "write_bytes")
		b = jsonline.Int(b, r.WriteBytes)
	}
	if r.PID != 0 {
		b = jsonline.Key(b, "pid")
		b = jsonline.Int(b, int64(r.PID))
	}
	if r.Lifetime != 0 {
		b = jsonline.Key(b, "lifetime")
		b = jsonline.Int(b, int64(r.Lifetime))
	}
	if r.OOMKilled {
		b = jsonline.Key(b, "oom_killed")
		b = append(b, "true"...)
	}
	if r.Kept {
		b = jsonline.Key(b, "kept")
		b = append(b, "true"...)
	}
	return append(b, '}'), true
}

// appendStrings appends ss as a JSON array (null when nil, as json.Marshal).
func appendStrings(b []byte, ss []string) []byte {
	if ss == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonline.String(b, s)
	}
	return append(b, ']')
}
