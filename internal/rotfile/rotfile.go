// Package rotfile is the append-only, size-rotated file under boxd's
// JSON-lines logs (the audit log and the events file): the live file
// NAME and its rotated predecessors NAME.1 (newest) to NAME.KEEP, each
// 0600 since they name every user's sandboxes and calls. Writes are not
// fsynced: a killed boxd loses nothing the kernel already has, only a
// host crash can lose the last few lines.
//
// No library fits: lumberjack names rotated files by timestamp and
// counts sizes in megabytes, and both logs keep their NAME.N files and
// byte limits.
package rotfile

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// File is one rotated log. It is safe for concurrent use.
type File struct {
	mu   sync.Mutex
	path string
	max  int64 // rotate before a write would take the file past this
	keep int   // rotated files kept
	f    *os.File
	size int64
	// allocated is how far the live file's blocks are allocated
	// (Reserve); writes below it need no new blocks.
	allocated int64
}

// Open opens (or creates) path for appending, narrowing a file left wider
// by hand or by an older boxd to 0600. maxBytes > 0 is the size limit and
// keep >= 1 the number of rotated files kept. The directory must exist.
func Open(path string, maxBytes int64, keep int) (*File, error) {
	if maxBytes <= 0 {
		return nil, fmt.Errorf("%s: size limit %d must be positive", path, maxBytes)
	}
	if keep < 1 {
		return nil, fmt.Errorf("%s: %d rotated files to keep must be at least 1", path, keep)
	}
	f, size, err := open(path)
	if err != nil {
		return nil, err
	}
	return &File{path: path, max: maxBytes, keep: keep, f: f, size: size}, nil
}

func open(path string) (*os.File, int64, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, 0, err
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, st.Size(), nil
}

// Path is the live file's path.
func (w *File) Path() string { return w.path }

// Write appends line (which ends in a newline), rotating first if it would
// take a non-empty file past the size limit. A failed rotation is
// reported, but the line is still written to the file open until then, so
// it is not lost.
func (w *File) Write(line []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return fmt.Errorf("%s: closed", w.path)
	}
	var rerr error
	if w.size > 0 && w.size+int64(len(line)) > w.max {
		rerr = w.rotate()
	}
	n, err := w.f.Write(line)
	w.size += int64(n)
	return errors.Join(rerr, err)
}

// reserveChunk is how much Reserve allocates at a time.
const reserveChunk = 256 << 10

// Reserve makes sure the next n bytes written need no new disk blocks,
// allocating (fallocate, the file's size unchanged) ahead when fewer
// remain, and rotating first if those bytes would take the file past its
// limit. An error (ENOSPC on a full disk) means a write of n bytes could
// fail: a caller that must not act unlogged refuses to act.
func (w *File) Reserve(n int64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return fmt.Errorf("%s: closed", w.path)
	}
	if w.size > 0 && w.size+n > w.max {
		if err := w.rotate(); err != nil {
			return err
		}
	}
	if w.size+n <= w.allocated {
		return nil
	}
	length := max(n, reserveChunk)
	if err := unix.Fallocate(int(w.f.Fd()), unix.FALLOC_FL_KEEP_SIZE, w.size, length); err != nil {
		return fmt.Errorf("%s: reserve %d bytes: %w", w.path, length, err)
	}
	w.allocated = w.size + length
	return nil
}

// rotate shifts NAME.i to NAME.i+1 (dropping NAME.keep), moves the live
// file to NAME.1 and opens a new one. If that fails the open file stays in
// use, whatever its name now is.
func (w *File) rotate() error {
	if _, err := os.Lstat(w.path); errors.Is(err, os.ErrNotExist) {
		// A rotation whose open failed: the file in use is NAME.1
		// already, only a new live file is missing.
		return w.reopen()
	}
	_ = os.Remove(fmt.Sprintf("%s.%d", w.path, w.keep))
	for i := w.keep - 1; i >= 1; i-- {
		err := os.Rename(fmt.Sprintf("%s.%d", w.path, i), fmt.Sprintf("%s.%d", w.path, i+1))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("rotate: %w", err)
		}
	}
	if err := os.Rename(w.path, w.path+".1"); err != nil {
		return fmt.Errorf("rotate: %w", err)
	}
	return w.reopen()
}

// reopen opens a new live file in place of the rotated one.
func (w *File) reopen() error {
	f, size, err := open(w.path)
	if err != nil {
		return fmt.Errorf("rotate: %w", err)
	}
	w.f.Close()
	w.f, w.size, w.allocated = f, size, 0
	return nil
}

// Close closes the live file; later writes fail.
func (w *File) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	return err
}
