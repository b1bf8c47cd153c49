//go:build linux

// Room: create. The init's log file on the host: kept bounded, quoted
// when an init dies before it is ready.

package runtime

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// The init's log is a file on the host (the shim appends the init's output
// to it), outside every limit of the sandbox. The init writes at most a
// budget per life; boxd keeps the file itself bounded, whatever wrote it.
const (
	// initLogMax is the size past which a reconcile pass or an init start
	// trims the log.
	initLogMax = 256 << 10
	// initLogKeep is how much of its end a trimmed log keeps.
	initLogKeep = 16 << 10
	// initLogQuote is how much of the end of the log a failed start quotes.
	initLogQuote = 1 << 10
)

func (m *Manager) initLogPath(id string) string { return filepath.Join(m.sandboxDir(id), "init.log") }

// trimLog cuts the file at path down to its last keep bytes (from a line
// start) once it is larger than max. It truncates in place instead of
// replacing the file, because the shim keeps it open for appending: a
// renamed-over file would go on growing unseen. A line the shim appends
// during the trim lands before the kept tail rather than being lost.
func trimLog(path string, max, keep int64) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("trim %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("trim %s: %w", path, err)
	}
	if !st.Mode().IsRegular() || st.Size() <= max {
		return nil
	}
	tail, err := readTail(f, st.Size(), keep)
	if err != nil {
		return fmt.Errorf("trim %s: %w", path, err)
	}
	if i := bytes.IndexByte(tail, '\n'); i >= 0 && i < len(tail)-1 {
		tail = tail[i+1:]
	}
	if err := f.Truncate(0); err != nil {
		return fmt.Errorf("trim %s: %w", path, err)
	}
	note := fmt.Sprintf("[boxd: log trimmed from %d bytes to its last %d]\n", st.Size(), len(tail))
	if _, err := f.Write(append([]byte(note), tail...)); err != nil {
		return fmt.Errorf("trim %s: %w", path, err)
	}
	return nil
}

// readLogTail returns at most the last n bytes of the file at path, reading
// only those: boxd never reads a whole log that something else wrote.
func readLogTail(path string, n int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	return readTail(f, st.Size(), n)
}

func readTail(f *os.File, size, n int64) ([]byte, error) {
	off := max(size-n, 0)
	buf := make([]byte, size-off)
	k, err := f.ReadAt(buf, off)
	if k == len(buf) {
		err = nil
	}
	return buf[:k], err
}
