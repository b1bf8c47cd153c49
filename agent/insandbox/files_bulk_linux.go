//go:build linux

package insandbox

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxd-dev/boxd/agent/wire"
)

// fsFailResult fills in why one file of a bulk operation failed.
func fsFailResult(r *wire.FileResult, op string, err error) {
	re := fsFail(op, r.Path, err)
	r.Code, r.Message = re.Code, re.Message
}

// fileUpload writes many files in one connection. A file that fails (bad
// path, permission denied, disk full) gets an error result and its data is
// skipped; the others go on. Results stream back as each file finishes, so
// the host must read them while it sends.
func (s *Server) fileUpload(conn net.Conn, fr *wire.FrameReader, fw *wire.FrameWriter, req *wire.Request) {
	var a wire.UploadArgs
	id, ok := s.fileSetup(fw, req, &a, func() string { return a.User })
	if !ok {
		return
	}
	dirs := &fsDirCache{}
	defer dirs.close()
	// Results go out through a buffer, flushed whenever the next read
	// might block: one write for many small files' results, and the host
	// still sees each result as soon as the init waits for more.
	bw := bufio.NewWriterSize(conn, 16<<10)
	rw := wire.NewFrameWriter(bw)
	for index := 0; ; index++ {
		if fr.Buffered() < wire.FrameHeaderLen && bw.Flush() != nil {
			return
		}
		f, err := fr.ReadFrame()
		if err != nil {
			return // the host left
		}
		switch f.Type {
		case wire.FrameOK:
			rw.WriteFrame(wire.FrameOK, nil)
			bw.Flush()
			return
		case wire.FrameResult:
		default:
			s.replyError(fw, "upload", wire.UnexpectedFrame(f.Type))
			return
		}
		if index >= wire.MaxBulkFiles {
			bw.Flush()
			s.replyError(fw, "upload", &wire.RemoteError{
				Message: fmt.Sprintf("upload: more than %d files in one call", wire.MaxBulkFiles),
				Code:    wire.CodeResourceExhausted,
			})
			return
		}
		var item wire.UploadItem
		d := json.NewDecoder(bytes.NewReader(f.Payload))
		d.DisallowUnknownFields()
		if err := d.Decode(&item); err != nil {
			bw.Flush()
			s.replyError(fw, "upload", fmt.Errorf("%w: malformed upload item: %v", wire.ErrInvalid, err))
			return
		}
		res := wire.FileResult{Index: index, Path: item.Path}
		p, err := cleanFilePath(s.workdir(), item.Path)
		var t *fsWriteTarget
		if err == nil {
			t, err = fsOpenWriteTarget(id, p, &wire.FileWriteArgs{Path: p, Mode: item.Mode, Parents: a.Parents}, dirs)
		}
		fd := -1
		if t != nil {
			fd = t.fd
		}
		n, werr, serr := fsReceiveData(fr, fd, true)
		if serr != nil {
			if t != nil {
				t.abort()
			}
			if !fsHostGone(serr) {
				bw.Flush()
				s.replyError(fw, "upload", serr)
			}
			return
		}
		res.Size = n
		switch {
		case err != nil:
			fsFailResult(&res, "write", err)
		case werr != nil:
			t.abort()
			fsFailResult(&res, "write", werr)
		default:
			if _, err := t.commit(false); err != nil {
				fsFailResult(&res, "write", err)
			}
		}
		if res.Code != "" {
			res.Size = 0
		}
		if err := rw.WriteJSON(wire.FrameResult, res); err != nil {
			return
		}
	}
}

// fileDownload sends many files in one connection, in the order asked.
// Each is a start mark, its data and a done mark; a file that cannot be
// read gets only a done mark with the error.
func (s *Server) fileDownload(conn net.Conn, fr *wire.FrameReader, fw *wire.FrameWriter, req *wire.Request) {
	var a wire.DownloadArgs
	id, ok := s.fileSetup(fw, req, &a, func() string { return a.User })
	if !ok {
		return
	}
	if len(a.Paths) > wire.MaxBulkFiles {
		s.replyError(fw, "download", &wire.RemoteError{
			Message: fmt.Sprintf("download: %d paths, at most %d in one call", len(a.Paths), wire.MaxBulkFiles),
			Code:    wire.CodeResourceExhausted,
		})
		return
	}
	wire.SetFileSocketBuffer(conn)
	// The frames of many small files go out in batches: one write per
	// frame (three per file) cost a system call here and a wake-up of
	// boxd's reader for each. What is buffered goes out when the buffer
	// fills (a big file's data bypasses it), at least every
	// downloadFlushEvery while files keep coming (a slow file does not
	// hold back the marks of those before it for longer), and at the end.
	bw := bufio.NewWriterSize(conn, downloadBatch)
	bfw := wire.NewFrameWriter(bw)
	flushed := time.Now()
	for i, path := range a.Paths {
		res := wire.FileResult{Index: i, Path: path}
		if err := s.downloadOne(bfw, id, &a, i, &res); err != nil {
			return // the host left
		}
		if err := bfw.WriteJSON(wire.FrameResult, wire.DownloadMark{Index: i, Done: &res}); err != nil {
			return
		}
		if time.Since(flushed) >= downloadFlushEvery {
			if bw.Flush() != nil {
				return
			}
			flushed = time.Now()
		}
	}
	if bfw.WriteFrame(wire.FrameOK, nil) == nil {
		bw.Flush()
	}
}

// downloadBatch is how much of a download the init gathers before it
// writes; downloadFlushEvery bounds how long a file's marks wait.
const (
	downloadBatch      = 256 << 10
	downloadFlushEvery = 5 * time.Millisecond
)

// downloadOne sends one file's start mark and data, recording a failure in
// res. Its error is only for a host that went away.
func (s *Server) downloadOne(fw *wire.FrameWriter, id *fsIdentity, a *wire.DownloadArgs, i int, res *wire.FileResult) error {
	p, err := cleanFilePath(s.workdir(), res.Path)
	if err != nil {
		fsFailResult(res, "read", err)
		return nil
	}
	fd, fi, err := fsOpenRead(id, p, a.NoFollow)
	if err != nil {
		fsFailResult(res, "read", err)
		return nil
	}
	defer unix.Close(fd)
	if err := fw.WriteJSON(wire.FrameResult, wire.DownloadMark{Index: i, Start: &fi}); err != nil {
		return err
	}
	n, err := fsSendData(fw, fd, 0, 0)
	res.Size = n
	if errors.Is(err, errFileHostWrite) {
		return err
	}
	if err != nil {
		fsFailResult(res, "read", fmt.Errorf("after %d bytes: %w", n, err))
	}
	return nil
}
