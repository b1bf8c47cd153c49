//go:build linux

package insandbox

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxd-dev/boxd/agent/wire"
	"github.com/boxd-dev/boxd/internal/safetar"
)

// copySource writes what a copy-out sends into the op's one tar writer:
// a tree (treeSource) or a batch of files (batchSource). bw is where the
// tar gathers into frames.
type copySource func(tw *safetar.Writer, bw *safetar.BatchWriter) error

// copyOut is every copy out of the sandbox: `boxctl cp`, the Docker
// endpoint's archive GET (a tree, as root) and FileService.DownloadFiles
// (a batch of files as a user, each with its result). Both are one tar,
// written here by one writer and sent as tar frames; only what goes in
// differs.
func (s *Server) copyOut(conn net.Conn, _ *wire.FrameReader, fw *wire.FrameWriter, req *wire.Request) {
	var src copySource
	var ok bool
	op := "copy-out " + req.Path
	if len(req.Args) > 0 {
		src, ok = s.batchSource(fw, req)
		op = "download"
	} else {
		src, ok = s.treeSource(fw, req.Path)
	}
	if !ok {
		return
	}
	wire.SetFileSocketBuffer(conn)
	buf := fileReadBufs.Get().(*[wire.FileChunk]byte)
	defer fileReadBufs.Put(buf)
	bw := &safetar.BatchWriter{Max: wire.FileChunk, Buf: buf[:0], Send: func(b []byte) error {
		if err := fw.WriteFrame(wire.FrameTar, b); err != nil {
			return fmt.Errorf("%w: %v", errFileHostWrite, err)
		}
		return nil
	}}
	tw := safetar.NewWriter(bw)
	err := src(tw, bw)
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		if !errors.Is(err, errFileHostWrite) {
			// The host discards the partial tar when an error frame ends it.
			s.replyError(fw, op, err)
		}
		return
	}
	fw.WriteFrame(wire.FrameTarEnd, nil)
}

// treeSource is a tar of path whose single top-level entry is base(path).
func (s *Server) treeSource(fw *wire.FrameWriter, path string) (copySource, bool) {
	fail := func(err error) (copySource, bool) {
		s.replyError(fw, "copy-out "+path, err)
		return nil, false
	}
	p, err := s.resolve(path)
	if err != nil {
		return fail(err)
	}
	if p == "/" {
		return fail(fmt.Errorf("%w: cannot copy out /: a tar needs a top-level name", wire.ErrInvalid))
	}
	if _, err := os.Lstat(p); err != nil {
		return fail(err)
	}
	return func(tw *safetar.Writer, _ *safetar.BatchWriter) error { return tw.Tree(p, filepath.Base(p)) }, true
}

// A batch's small files go out in frames of downloadBatch, so boxd reads
// one while the init writes the next, and at least every
// downloadFlushEvery while files keep coming (a slow file does not hold
// back those before it).
const (
	downloadBatch      = 256 << 10
	downloadFlushEvery = 5 * time.Millisecond
)

// batchSource is a batch's files (wire.DownloadArgs), each read like
// file-read as the batch's user. A file that cannot be read gets an error
// entry; the others go on.
func (s *Server) batchSource(fw *wire.FrameWriter, req *wire.Request) (copySource, bool) {
	if req.Path != wire.BatchPath {
		s.replyError(fw, "download", fmt.Errorf("%w: copy-out with both a path and download arguments", wire.ErrInvalid))
		return nil, false
	}
	var a wire.DownloadArgs
	id, ok := s.fileSetup(fw, &wire.Request{Op: "download", Args: req.Args}, &a, func() string { return a.User })
	if !ok {
		return nil, false
	}
	if len(a.Paths) > wire.MaxBulkFiles {
		s.replyError(fw, "download", &wire.RemoteError{
			Message: fmt.Sprintf("download: %d paths, at most %d in one call", len(a.Paths), wire.MaxBulkFiles),
			Code:    wire.CodeResourceExhausted,
		})
		return nil, false
	}
	return func(tw *safetar.Writer, bw *safetar.BatchWriter) error {
		buf := fileReadBufs.Get().(*[wire.FileChunk]byte)
		defer fileReadBufs.Put(buf)
		flushed := time.Now()
		for _, path := range a.Paths {
			if err := s.downloadOne(tw, id, &a, path, buf[:]); err != nil {
				return err
			}
			if len(bw.Buf) >= downloadBatch || time.Since(flushed) >= downloadFlushEvery {
				if err := bw.Flush(); err != nil {
					return err
				}
				flushed = time.Now()
			}
		}
		return nil
	}, true
}

// downloadOne writes one file of a batch: its pieces, read through buf,
// and an error entry if it failed. Its error is the tar stream's.
func (s *Server) downloadOne(tw *safetar.Writer, id *fsIdentity, a *wire.DownloadArgs, path string, buf []byte) error {
	p, err := cleanFilePath(s.workdir(), path)
	if err != nil {
		return failEntry(tw, path, err, false)
	}
	fd, fi, err := fsOpenRead(id, p, a.NoFollow)
	if err != nil {
		return failEntry(tw, path, err, false)
	}
	defer unix.Close(fd)
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: fi.Path, Mode: int64(fi.Mode), Uid: int(fi.UID), Gid: int(fi.GID),
		ModTime: fi.Mtime, Format: tar.FormatPAX}
	var off int64
	for {
		n, rerr := fsPreadFull(fd, buf, off)
		if n > 0 || off == 0 {
			if off == 0 && int64(n) != fi.Size {
				hdr.PAXRecords = map[string]string{wire.PAXSize: strconv.FormatInt(fi.Size, 10)}
			}
			if err := tw.Entry(hdr, buf[:n]); err != nil {
				return err
			}
			off += int64(n)
			hdr.PAXRecords = appendRecords
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return failEntry(tw, path, fmt.Errorf("after %d bytes: %w", off, rerr), true)
		}
	}
}

// appendRecords are the PAX records of a piece that continues a file.
var appendRecords = map[string]string{wire.PAXAppend: "1"}

// failEntry writes the entry that says the file at path (as asked)
// failed; appended says it ends a file begun.
func failEntry(tw *safetar.Writer, path string, err error, appended bool) error {
	re := fsFail("read", path, err)
	name := path
	if name == "" || strings.IndexByte(name, 0) >= 0 {
		name = "nul" // tar cannot name it; the result carries the path asked for
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Format: tar.FormatPAX,
		PAXRecords: map[string]string{wire.PAXCode: re.Code, wire.PAXMessage: re.Message}}
	if appended {
		hdr.PAXRecords[wire.PAXAppend] = "1"
	}
	return tw.Entry(hdr, nil)
}
