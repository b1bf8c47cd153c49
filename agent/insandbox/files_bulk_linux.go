//go:build linux

package insandbox

import (
	"bufio"
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
