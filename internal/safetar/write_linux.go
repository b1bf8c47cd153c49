//go:build linux

package safetar

import (
	"archive/tar"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// copyBuf is the buffer file data is copied through, both ways: on this
// machine class every syscall is dear, and io.Copy's 32 KiB means 32
// reads and 32 writes (and, in boxd, 32 frames or messages) per MiB.
const copyBuf = 1 << 20

// copyBufs keeps copyBuf buffers: a fresh MiB is 256 first-touch page
// faults.
var copyBufs = sync.Pool{New: func() any { return new([copyBuf]byte) }}

// Write writes a tar of srcPath to w whose top-level entry is called name
// (NewWriter, Tree and Close).
func Write(w io.Writer, srcPath, name string) error {
	tw := NewWriter(w)
	if err := tw.Tree(srcPath, name); err != nil {
		return err
	}
	return tw.Close()
}

// Writer writes one tar stream: trees (Tree) and entries whose data the
// caller has in hand (Entry), in any order. It is the one tar writer of
// everything boxd-init sends out of a sandbox, and of boxctl's uploads.
// Headers are made by AppendHeader.
type Writer struct {
	w    io.Writer
	hdr  []byte // header blocks, reused
	left int64  // data the entry still needs
	pad  int64  // size of the entry, for its padding
}

// NewWriter starts a tar stream on w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Tree writes the tree at srcPath as entries under name. srcPath itself is
// not followed if it is a symlink, and neither is anything below it: the
// tree is walked with descriptors opened O_NOFOLLOW, so a concurrent
// rename of a directory into a symlink cannot redirect the walk.
func (w *Writer) Tree(srcPath, name string) error {
	if err := checkComponent(name); err != nil {
		return err
	}
	parent, err := unix.Open(filepath.Dir(srcPath), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("safetar: open %s: %w", filepath.Dir(srcPath), err)
	}
	defer unix.Close(parent)
	return writeEntry(w, parent, filepath.Base(srcPath), name)
}

// Entry writes one entry of hdr.Size = len(data) bytes, data.
func (w *Writer) Entry(hdr *tar.Header, data []byte) error {
	hdr.Size = int64(len(data))
	if err := w.WriteHeader(hdr); err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		return fmt.Errorf("safetar: archive %s: %w", hdr.Name, err)
	}
	return nil
}

// WriteHeader ends the entry before (which must have had all its data)
// and begins hdr's; Write then takes its hdr.Size bytes of data.
func (w *Writer) WriteHeader(hdr *tar.Header) error {
	if err := w.endEntry(); err != nil {
		return err
	}
	var err error
	if w.hdr, err = AppendHeader(w.hdr[:0], hdr); err != nil {
		return fmt.Errorf("safetar: write header %s: %w", hdr.Name, err)
	}
	if _, err := w.w.Write(w.hdr); err != nil {
		return err
	}
	if hdr.Typeflag == tar.TypeReg {
		w.left, w.pad = hdr.Size, hdr.Size
	}
	return nil
}

// Write writes the entry's data.
func (w *Writer) Write(p []byte) (int, error) {
	if int64(len(p)) > w.left {
		return 0, tar.ErrWriteTooLong
	}
	n, err := w.w.Write(p)
	w.left -= int64(n)
	return n, err
}

func (w *Writer) endEntry() error {
	if w.left > 0 {
		return fmt.Errorf("safetar: entry ended %d bytes short", w.left)
	}
	if p := Pad(w.pad); len(p) > 0 {
		if _, err := w.w.Write(p); err != nil {
			return err
		}
	}
	w.pad = 0
	return nil
}

// Close writes the end-of-archive marker; it does not close the
// underlying writer.
func (w *Writer) Close() error {
	if err := w.endEntry(); err != nil {
		return fmt.Errorf("safetar: finish archive: %w", err)
	}
	_, err := w.w.Write(Trailer())
	return err
}

func writeEntry(tw *Writer, dirfd int, base, name string) error {
	if len(name) > MaxNameLen {
		return fmt.Errorf("safetar: %s: name longer than %d bytes", name, MaxNameLen)
	}
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("safetar: stat %s: %w", name, err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return writeFile(tw, dirfd, base, name)
	case unix.S_IFDIR:
		return writeDir(tw, dirfd, base, name, &st)
	case unix.S_IFLNK:
		target, err := readlinkat(dirfd, base)
		if err != nil {
			return fmt.Errorf("safetar: readlink %s: %w", name, err)
		}
		hdr := header(name, tar.TypeSymlink, &st)
		hdr.Linkname = target
		return writeHeader(tw, hdr)
	}
	return nil // sockets, FIFOs, devices: documented as skipped
}

func writeFile(tw *Writer, dirfd int, base, name string) error {
	// O_NONBLOCK: if the file was swapped for a FIFO since the stat, the
	// open must not hang waiting for a writer. It is a no-op on regular files.
	fd, err := unix.Openat(dirfd, base, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("safetar: open %s: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("safetar: stat %s: %w", name, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil // replaced by something we do not archive
	}
	if err := writeHeader(tw, header(name, tar.TypeReg, &st)); err != nil {
		return err
	}
	// Copy exactly the size in the header: a file that grows meanwhile is
	// cut, one that shrinks is an error (the header already promised more).
	buf := copyBufs.Get().(*[copyBuf]byte)
	defer copyBufs.Put(buf)
	n, err := io.CopyBuffer(tw, io.LimitReader(f, st.Size), buf[:])
	if err != nil {
		return fmt.Errorf("safetar: archive %s: %w", name, err)
	}
	if n < st.Size {
		return fmt.Errorf("safetar: %s: file shrank while archiving (%d of %d bytes)", name, n, st.Size)
	}
	return nil
}

func writeDir(tw *Writer, dirfd int, base, name string, st *unix.Stat_t) error {
	fd, err := unix.Openat(dirfd, base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("safetar: open %s: %w", name, err)
	}
	d := os.NewFile(uintptr(fd), name)
	defer d.Close()
	if err := writeHeader(tw, header(name+"/", tar.TypeDir, st)); err != nil {
		return err
	}
	names, err := d.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("safetar: list %s: %w", name, err)
	}
	slices.Sort(names) // reproducible archives
	for _, n := range names {
		if err := writeEntry(tw, fd, n, name+"/"+n); err != nil {
			return err
		}
	}
	return nil
}

func header(name string, typ byte, st *unix.Stat_t) *tar.Header {
	return &tar.Header{
		Typeflag: typ,
		Name:     name,
		Mode:     int64(st.Mode & 0o7777),
		Uid:      int(st.Uid),
		Gid:      int(st.Gid),
		Size:     sizeFor(typ, st),
		// Whole seconds, truncated: tar would round, making a file newer.
		ModTime: time.Unix(st.Mtim.Sec, 0),
	}
}

func sizeFor(typ byte, st *unix.Stat_t) int64 {
	if typ == tar.TypeReg {
		return st.Size
	}
	return 0
}

func writeHeader(tw *Writer, hdr *tar.Header) error { return tw.WriteHeader(hdr) }

// readlinkat reads a symlink target of any length up to MaxNameLen.
func readlinkat(dirfd int, base string) (string, error) {
	buf := make([]byte, MaxNameLen+1)
	n, err := unix.Readlinkat(dirfd, base, buf)
	if err != nil {
		return "", err
	}
	if n > MaxNameLen {
		return "", fmt.Errorf("symlink target longer than %d bytes", MaxNameLen)
	}
	return string(buf[:n]), nil
}
