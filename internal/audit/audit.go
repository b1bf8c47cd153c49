// Package audit writes boxd's audit log: one JSON line per mutating API
// call (who, which call, which sandbox, how it ended) in a file only root
// can read, rotated by size so it never fills the state directory.
package audit

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/boxd-dev/boxd/internal/jsonline"
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
	return append(b, '}'), nil
}

// FileName is the live log's name in its directory; rotated files are
// FileName.1 (newest) to FileName.N.
const FileName = "audit.log"

// Log is an append-only, size-rotated JSON-lines file. It is safe for
// concurrent use.
type Log struct {
	mu   sync.Mutex
	path string
	max  int64 // rotate once the file would grow past this
	keep int   // rotated files kept
	f    *os.File
	size int64
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
	l := &Log{path: filepath.Join(dir, FileName), max: maxBytes, keep: keep}
	if err := l.open(); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *Log) open() error {
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("audit log %s: %w", l.path, err)
	}
	// A file left by an older boxd or made by hand may be wider.
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("audit log %s: %w", l.path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("audit log %s: %w", l.path, err)
	}
	l.f, l.size = f, st.Size()
	return nil
}

// Path is the live file's path.
func (l *Log) Path() string { return l.path }

// Write appends e as one line, rotating first if the line would take the
// file past its size limit.
func (l *Log) Write(e Entry) error {
	b, err := e.appendJSON(make([]byte, 0, 256))
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	b = append(b, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return fmt.Errorf("audit log %s: closed", l.path)
	}
	if l.size > 0 && l.size+int64(len(b)) > l.max {
		if err := l.rotate(); err != nil {
			return err
		}
	}
	n, err := l.f.Write(b)
	l.size += int64(n)
	if err != nil {
		return fmt.Errorf("audit log %s: %w", l.path, err)
	}
	return nil
}

// rotate shifts FileName.i to FileName.i+1 (dropping the oldest beyond
// keep) and starts a new live file.
func (l *Log) rotate() error {
	if err := l.f.Close(); err != nil {
		return fmt.Errorf("audit log %s: %w", l.path, err)
	}
	l.f = nil
	_ = os.Remove(fmt.Sprintf("%s.%d", l.path, l.keep))
	for i := l.keep - 1; i >= 1; i-- {
		if err := os.Rename(fmt.Sprintf("%s.%d", l.path, i), fmt.Sprintf("%s.%d", l.path, i+1)); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("audit log rotate: %w", err)
		}
	}
	if err := os.Rename(l.path, l.path+".1"); err != nil {
		return fmt.Errorf("audit log rotate: %w", err)
	}
	return l.open()
}

// Close closes the live file.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
