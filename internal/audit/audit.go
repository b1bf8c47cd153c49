// Package audit writes boxd's audit log: one JSON line per mutating API
// call (who, which call, which sandbox, how it ended) in a file only root
// can read, rotated by size so it never fills the state directory.
package audit

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/boxd-dev/boxd/internal/jsonline"
	"github.com/boxd-dev/boxd/internal/rotfile"
)

// Entry is one audited call.
type Entry struct {
	Time    time.Time `json:"time"`
	UID     int64     `json:"uid"` // -1: no peer credentials
	PID     int32     `json:"pid"`
	Method  string    `json:"method"`            // the RPC's procedure, /boxd.v1.SandboxService/Exec
	Sandbox string    `json:"sandbox,omitempty"` // id or name as the caller gave it; the new id for a create
	Result  string    `json:"result"`            // "ok" or the API error code (not_found, ...)
	Error   string    `json:"error,omitempty"`
	Token   string    `json:"token,omitempty"` // the bearer token's name, for a call on a TCP listener
}

// appendJSON appends the entry as json.Marshal encodes it (jsonline: one
// is written per mutating call, every exec among them).
func (e *Entry) appendJSON(b []byte) ([]byte, error) {
	start := len(b)
	b = append(b, '{')
	b = jsonline.Key(b, "time")
	b, ok := jsonline.Time(b, e.Time)
	if !ok {
		j, err := json.Marshal(e)
		return append(b[:start], j...), err
	}
	b = jsonline.Key(b, "uid")
	b = jsonline.Int(b, e.UID)
	b = jsonline.Key(b, "pid")
	b = jsonline.Int(b, int64(e.PID))
	b = jsonline.Key(b, "method")
	b = jsonline.String(b, e.Method)
	b = jsonline.OmitEmpty(b, "sandbox", e.Sandbox)
	b = jsonline.Key(b, "result")
	b = jsonline.String(b, e.Result)
	b = jsonline.OmitEmpty(b, "error", e.Error)
	b = jsonline.OmitEmpty(b, "token", e.Token)
	return append(b, '}'), nil
}

// FileName is the live log's name in its directory; rotated files are
// FileName.1 (newest) to FileName.N.
const FileName = "audit.log"

// Log is an append-only, size-rotated JSON-lines file. It is safe for
// concurrent use.
type Log struct {
	f *rotfile.File
}

// Open opens (or creates, 0600) dir/FileName for appending. maxBytes > 0
// is the size at which the file is rotated; keep >= 1 rotated files are
// kept.
func Open(dir string, maxBytes int64, keep int) (*Log, error) {
	if maxBytes <= 0 {
		return nil, fmt.Errorf("audit log: size limit %d must be positive", maxBytes)
	}
	if keep < 1 {
		return nil, fmt.Errorf("audit log: %d rotated files to keep must be at least 1", keep)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("audit log dir %s: %w", dir, err)
	}
	f, err := rotfile.Open(filepath.Join(dir, FileName), maxBytes, keep)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	return &Log{f: f}, nil
}

// Path is the live file's path.
func (l *Log) Path() string { return l.f.Path() }

// Write appends e as one line, rotating first if the line would take the
// file past its size limit.
func (l *Log) Write(e Entry) error {
	b, err := e.appendJSON(make([]byte, 0, 256))
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	if err := l.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	return nil
}

// ReserveBytes is what Reserve keeps allocated ahead: room for 64 lines
// of calls in flight (a line is at most about 1 KiB).
const ReserveBytes = 64 << 10

// Reserve makes sure the next lines can be written: a mutating call asks
// before it acts and is refused if the log's disk is full, so that no
// acknowledged call goes unaudited.
func (l *Log) Reserve() error {
	if err := l.f.Reserve(ReserveBytes); err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	return nil
}

// Close closes the live file.
func (l *Log) Close() error { return l.f.Close() }
