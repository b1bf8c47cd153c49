//go:build linux

package dockerapi

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/boxd-dev/boxd/agent/wire"
)

// maxLogBytes caps a container's kept output; past it, output is dropped
// (the command still runs) and the log says so once.
const maxLogBytes = 64 << 20

// A log record: stream (1 byte), unix nanoseconds (8), length (4), data.
// Records hold at most maxRecord bytes of data, so a reader's buffer
// holds any whole record.
const (
	recHeader = 13
	maxRecord = 32 << 10
)

func (x *ctr) logPath() string { return filepath.Join(x.dir, "log") }

// copyLog follows the main command (process procID) and appends its output
// to the container's log until it exits; it returns the command's result.
// skip holds, per stream, how many bytes of the init's replay the log
// already has (a run followed again after a boxd restart).
func (s *Server) copyLog(ctx context.Context, x *ctr, procID string, skip [3]int64) (wire.ExecResult, error) {
	f, err := os.OpenFile(x.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return wire.ExecResult{}, fmt.Errorf("container log: %w", err)
	}
	defer f.Close()
	size := int64(0)
	if st, err := f.Stat(); err == nil {
		size = st.Size()
	}
	ps, _, err := s.Manager.AttachProcess(ctx, x.id, wire.AttachArgs{ID: procID})
	if err != nil {
		return wire.ExecResult{}, err
	}
	defer ps.Close()
	noted := false
	for {
		ev, err := ps.Next()
		if errors.Is(err, io.EOF) {
			info, werr := s.Manager.WaitProcess(ctx, x.id, procID)
			if werr != nil || info.Result == nil {
				return wire.ExecResult{}, fmt.Errorf("main command: the stream ended without a result: %v", werr)
			}
			return *info.Result, nil
		}
		if err != nil {
			return wire.ExecResult{}, err
		}
		if ev.Result != nil {
			return *ev.Result, nil
		}
		stream := byte(streamStdout)
		if ev.Stream == wire.FrameStderr {
			stream = streamStderr
		}
		data := ev.Data
		if k := min(skip[stream], int64(len(data))); k > 0 {
			skip[stream] -= k
			data = data[k:]
			if len(data) == 0 {
				continue
			}
		}
		if size+int64(len(data)) > maxLogBytes {
			if noted {
				continue
			}
			noted, stream, data = true, streamStderr, []byte("boxd: the container's log is full; further output is dropped\n")
		}
		now := time.Now()
		for len(data) > 0 {
			chunk := data[:min(len(data), maxRecord)]
			data = data[len(chunk):]
			n, err := f.Write(appendRecord(nil, stream, now, chunk))
			size += int64(n)
			if err != nil {
				return wire.ExecResult{}, fmt.Errorf("container log: %w", err)
			}
		}
	}
}

func appendRecord(b []byte, stream byte, t time.Time, data []byte) []byte {
	var hdr [recHeader]byte
	hdr[0] = stream
	binary.BigEndian.PutUint64(hdr[1:9], uint64(t.UnixNano()))
	binary.BigEndian.PutUint32(hdr[9:], uint32(len(data)))
	return append(append(b, hdr[:]...), data...)
}

type record struct {
	stream byte
	t      time.Time
	data   []byte
}

// readRecords reads whole records from r; a partial one at the end (a
// write in progress) is left for the next read.
func readRecords(r *bufio.Reader, fn func(record) error) (int64, error) {
	var done int64
	for {
		hdr, err := r.Peek(recHeader)
		if err != nil {
			return done, nil
		}
		n := int(binary.BigEndian.Uint32(hdr[9:]))
		if n > maxRecord {
			return done, fmt.Errorf("container log: corrupt record")
		}
		b, err := r.Peek(recHeader + n)
		if err != nil {
			return done, nil
		}
		rec := record{stream: b[0], t: time.Unix(0, int64(binary.BigEndian.Uint64(b[1:9]))), data: append([]byte(nil), b[recHeader:]...)}
		_, _ = r.Discard(recHeader + n)
		done += int64(recHeader + n)
		if err := fn(rec); err != nil {
			return done, err
		}
	}
}

// logOptions are the logs call's parameters.
type logOptions struct {
	stdout, stderr, follow, timestamps bool
	tail                               int // -1: all
	since                              time.Time
}

func logOptionsOf(r *http.Request) logOptions {
	o := logOptions{stdout: boolParam(r, "stdout"), stderr: boolParam(r, "stderr"), follow: boolParam(r, "follow"),
		timestamps: boolParam(r, "timestamps"), tail: -1}
	if n, err := strconv.Atoi(r.URL.Query().Get("tail")); err == nil && n >= 0 {
		o.tail = n
	}
	if sec, err := strconv.ParseFloat(r.URL.Query().Get("since"), 64); err == nil && sec > 0 {
		o.since = time.Unix(0, int64(sec*1e9))
	}
	return o
}

func (s *Server) containerLogs(w http.ResponseWriter, r *http.Request) {
	_, x, err := s.container(r)
	if err != nil {
		fail(w, err)
		return
	}
	o := logOptionsOf(r)
	if !o.stdout && !o.stderr {
		fail(w, errf(http.StatusBadRequest, "Bad parameters: you must choose at least one stream"))
		return
	}
	ch, running := x.exitedChan()
	w.Header().Set("Content-Type", "application/vnd.docker.raw-stream")
	if !x.cfg.Tty && !versionLess(apiVersion(r), "1.42") {
		w.Header().Set("Content-Type", "application/vnd.docker.multiplexed-stream")
	}
	w.WriteHeader(http.StatusOK)
	out := &muxWriter{w: flushWriter{w}}
	emit := func(rec record) error {
		if (rec.stream == streamStdout && !o.stdout) || (rec.stream == streamStderr && !o.stderr) || rec.t.Before(o.since) {
			return nil
		}
		data := rec.data
		if o.timestamps {
			data = append([]byte(rec.t.UTC().Format(time.RFC3339Nano)+" "), data...)
		}
		return streamWriter{out, rec.stream, x.cfg.Tty}.writeAll(data)
	}
	f, err := os.Open(x.logPath())
	if err != nil {
		return // no output yet
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	if err := s.writeTail(br, o, emit); err != nil || !o.follow || !running {
		return
	}
	for {
		if _, err := readRecords(br, emit); err != nil {
			return
		}
		select {
		case <-ch:
			_, _ = readRecords(br, emit)
			return
		case <-r.Context().Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// writeTail emits the log's records, only the last o.tail lines if set.
func (s *Server) writeTail(br *bufio.Reader, o logOptions, emit func(record) error) error {
	if o.tail < 0 {
		_, err := readRecords(br, emit)
		return err
	}
	var lines []record
	_, err := readRecords(br, func(rec record) error {
		for len(rec.data) > 0 {
			i := 0
			for i < len(rec.data) && rec.data[i] != '\n' {
				i++
			}
			if i < len(rec.data) {
				i++
			}
			lines = append(lines, record{rec.stream, rec.t, rec.data[:i]})
			rec.data = rec.data[i:]
		}
		if len(lines) > 2*o.tail+1024 {
			lines = append(lines[:0], lines[len(lines)-o.tail:]...)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(lines) > o.tail {
		lines = lines[len(lines)-o.tail:]
	}
	for _, l := range lines {
		if err := emit(l); err != nil {
			return err
		}
	}
	return nil
}
