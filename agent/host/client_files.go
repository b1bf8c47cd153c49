package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/containerd/errdefs"

	"github.com/boxd-dev/boxd/agent/wire"
	"github.com/boxd-dev/boxd/internal/safetar"
)

// ChunkSource is implemented by readers that already hold their data in
// pieces, such as an API stream's messages: WriteFile and UploadFiles send
// each piece as it is instead of copying it through a buffer. NextChunk
// returns io.EOF at the end; a chunk is only used until the next call.
type ChunkSource interface {
	NextChunk() ([]byte, error)
}

// fileClassError gives an error from the init the errdefs class of a code
// RemoteError.Unwrap does not know.
type fileClassError struct {
	*wire.RemoteError
	class error
}

func (e *fileClassError) Unwrap() []error { return []error{e.RemoteError, e.class} }

// fileError makes the error of a file operation. The init's errors already
// name the operation and path; other errors (connection, protocol) get
// them here.
func fileError(ctx context.Context, op, path string, err error) error {
	var he *handlerError
	if err == nil || errors.As(err, &he) {
		return unwrapHandler(err)
	}
	err = ctxErr(ctx, err)
	var re *wire.RemoteError
	if errors.As(err, &re) {
		switch re.Code {
		case wire.CodeFailedPrecondition:
			return &fileClassError{re, errdefs.ErrFailedPrecondition}
		case wire.CodeResourceExhausted:
			return &fileClassError{re, errdefs.ErrResourceExhausted}
		}
		return re
	}
	return fmt.Errorf("%s %s: %w", op, wire.QuotePath(path), err)
}

func (c *Client) openFileOp(ctx context.Context, op string, args any) (*conn, error) {
	b, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	return c.open(ctx, wire.Request{Op: op, Args: b})
}

// simpleFileOp runs an operation whose answer is one frame.
func (c *Client) simpleFileOp(ctx context.Context, op, name, path string, args any, want wire.FrameType, v any) error {
	cn, err := c.openFileOp(ctx, op, args)
	if err != nil {
		return fileError(ctx, name, path, err)
	}
	defer cn.close()
	if err := cn.readReply(want, v); err != nil {
		return fileError(ctx, name, path, err)
	}
	return nil
}

// fileSendBufs holds the client's send buffers for readers that are not
// ChunkSources.
var fileSendBufs = sync.Pool{New: func() any { return new([wire.FileChunk]byte) }}

// fileSendStream sends r as data frames of up to FileChunk bytes, then
// data-end. A failure of r is a *sourceError.
func fileSendStream(fw *wire.FrameWriter, r io.Reader, counted *atomic.Int64) error {
	if r != nil {
		if err := sendChunks(fw, wire.FrameFileData, r, counted); err != nil {
			return err
		}
	}
	return fw.WriteFrame(wire.FrameFileDataEnd, nil)
}

// WriteFile writes r to a file inside the sandbox; see FileWriteArgs. By
// default the file is replaced atomically: a reader sees the old content
// or the new, never a mix, and a failed or cancelled write leaves the old
// file as it was.
func (c *Client) WriteFile(ctx context.Context, a wire.FileWriteArgs, r io.Reader) (wire.FileWriteResult, error) {
	var res wire.FileWriteResult
	cn, err := c.openFileOp(ctx, wire.OpFileWrite, a)
	if err != nil {
		return res, fileError(ctx, "write", a.Path, err)
	}
	defer cn.close()
	wire.SetFileSocketBuffer(cn.c)
	werr := fileSendStream(cn.fw, r, nil)
	var src *sourceError
	if errors.As(werr, &src) {
		// Closing without data-end makes the init discard the file.
		return res, fileError(ctx, "write", a.Path, werr)
	}
	// If the init refused the file it said why before closing; that beats
	// the broken pipe the send may have hit.
	if err := cn.readReply(wire.FrameResult, &res); err != nil {
		return res, fileError(ctx, "write", a.Path, err)
	}
	if werr != nil {
		return res, fileError(ctx, "write", a.Path, werr)
	}
	return res, nil
}

// FileReadStream is a file being read from the sandbox.
type FileReadStream struct {
	// Stat describes the file as opened.
	Stat wire.FileStat

	ctx     context.Context
	cn      *conn
	path    string
	limit   int64 // most bytes the init may send; < 0: no limit
	got     int64
	pending []byte
	err     error
}

// ReadFile opens a file inside the sandbox for reading; see FileReadArgs.
// The caller must Close the stream.
func (c *Client) ReadFile(ctx context.Context, a wire.FileReadArgs) (*FileReadStream, error) {
	cn, err := c.openFileOp(ctx, wire.OpFileRead, a)
	if err != nil {
		return nil, fileError(ctx, "read", a.Path, err)
	}
	s := &FileReadStream{ctx: ctx, cn: cn, path: a.Path, limit: -1}
	if a.Length > 0 {
		s.limit = a.Length
	}
	if err := cn.readReply(wire.FrameResult, &s.Stat); err != nil {
		cn.close()
		return nil, fileError(ctx, "read", a.Path, err)
	}
	return s, nil
}

// NextChunk returns the next piece of the file, valid until the next call,
// or io.EOF at its end.
func (s *FileReadStream) NextChunk() ([]byte, error) {
	if s.err != nil {
		return nil, s.err
	}
	f, err := s.cn.fr.ReadFrame()
	switch {
	case err == io.EOF:
		err = fmt.Errorf("%w: stream ended before %s frame", wire.ErrProtocol, wire.FrameFileDataEnd)
	case err != nil:
	case f.Type == wire.FrameFileData:
		s.got += int64(len(f.Payload))
		if s.limit >= 0 && s.got > s.limit {
			err = fmt.Errorf("%w: more data than the %d bytes asked for", wire.ErrProtocol, s.limit)
			break
		}
		return f.Payload, nil
	case f.Type == wire.FrameFileDataEnd:
		s.err = io.EOF
		return nil, io.EOF
	case f.Type == wire.FrameError:
		err = wire.DecodeRemoteError(f.Payload)
	default:
		err = wire.UnexpectedFrame(f.Type)
	}
	s.err = fileError(s.ctx, "read", s.path, err)
	return nil, s.err
}

func (s *FileReadStream) Read(p []byte) (int, error) {
	for len(s.pending) == 0 {
		b, err := s.NextChunk()
		if err != nil {
			return 0, err
		}
		s.pending = b
	}
	n := copy(p, s.pending)
	s.pending = s.pending[n:]
	return n, nil
}

// WriteTo hands each frame's payload straight to w, without a copy.
func (s *FileReadStream) WriteTo(w io.Writer) (int64, error) {
	var n int64
	if len(s.pending) > 0 {
		m, err := w.Write(s.pending)
		n += int64(m)
		s.pending = nil
		if err != nil {
			return n, err
		}
	}
	for {
		b, err := s.NextChunk()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		m, err := w.Write(b)
		n += int64(m)
		if err != nil {
			return n, err
		}
	}
}

// Close ends the read; before the end of the file, the init stops reading.
func (s *FileReadStream) Close() error {
	s.cn.close()
	return nil
}

// StatFile describes a file inside the sandbox; see FileStatArgs.
func (c *Client) StatFile(ctx context.Context, a wire.FileStatArgs) (wire.FileStat, error) {
	var fi wire.FileStat
	err := c.simpleFileOp(ctx, wire.OpFileStat, "stat", a.Path, a, wire.FrameResult, &fi)
	return fi, err
}

// ListDir lists a directory inside the sandbox, handing fn the entries in
// batches; see FileListArgs. Entries come depth first, sorted by name
// within each directory.
func (c *Client) ListDir(ctx context.Context, a wire.FileListArgs, fn func([]wire.FileStat) error) error {
	cn, err := c.openFileOp(ctx, wire.OpFileList, a)
	if err != nil {
		return fileError(ctx, "list", a.Path, err)
	}
	defer cn.close()
	err = cn.readResults("listing", func(p []byte) error {
		var batch []wire.FileStat
		if err := json.Unmarshal(p, &batch); err != nil {
			return fmt.Errorf("%w: malformed list frame: %v", wire.ErrProtocol, err)
		}
		return handlerErr(fn(batch))
	}, nil)
	return fileError(ctx, "list", a.Path, err)
}

// MakeDir creates a directory inside the sandbox; see FileMkdirArgs.
func (c *Client) MakeDir(ctx context.Context, a wire.FileMkdirArgs) error {
	return c.simpleFileOp(ctx, wire.OpFileMkdir, "mkdir", a.Path, a, wire.FrameOK, nil)
}

// RemovePath removes a file, a symlink (not its target) or an empty
// directory, or with Recursive a whole tree.
func (c *Client) RemovePath(ctx context.Context, a wire.FileRemoveArgs) error {
	return c.simpleFileOp(ctx, wire.OpFileRemove, "remove", a.Path, a, wire.FrameOK, nil)
}

// RenamePath renames a path inside the sandbox (rename(2) semantics: an
// existing destination file is replaced unless NoOverwrite).
func (c *Client) RenamePath(ctx context.Context, a wire.FileRenameArgs) error {
	return c.simpleFileOp(ctx, wire.OpFileRename, "rename", a.Src, a, wire.FrameOK, nil)
}

// ChmodPath sets a path's mode; a symlink is refused, not followed.
func (c *Client) ChmodPath(ctx context.Context, a wire.FileChmodArgs) error {
	return c.simpleFileOp(ctx, wire.OpFileChmod, "chmod", a.Path, a, wire.FrameOK, nil)
}

// UploadFiles writes many files in one operation: a copy-in whose tar is
// the batch's (see wire.UploadArgs), built here from next's files. next
// returns each file and its data in turn, then io.EOF; result receives
// each file's outcome, in order, from another goroutine. One file failing
// does not stop the others; the returned error is about the operation as
// a whole.
func (c *Client) UploadFiles(ctx context.Context, a wire.UploadArgs, next func() (wire.UploadItem, io.Reader, error), result func(wire.FileResult) error) error {
	args, err := json.Marshal(a)
	if err != nil {
		return fileError(ctx, "upload", "", err)
	}
	// An init that knows only trees refuses BatchPath.
	cn, err := c.open(ctx, wire.Request{Op: wire.OpCopyIn, Path: wire.BatchPath, Args: args})
	if err != nil {
		return fileError(ctx, "upload", "", err)
	}
	defer cn.close()
	wire.SetFileSocketBuffer(cn.c)
	// Results come back while files still go out: read them concurrently,
	// or both sides could block on full socket buffers.
	var sent sentFiles
	readDone := make(chan error, 1)
	go func() { readDone <- cn.readUploadResults(&sent, result) }()
	werr := sendBatch(cn.fw, next, &sent)
	var src *sourceError
	var cls *fileClassError
	if errors.As(werr, &src) || errors.As(werr, &cls) {
		cn.c.Close() // stops the reader; files already written stay
		<-readDone
		return fileError(ctx, "upload", "", werr)
	}
	if rerr := <-readDone; rerr != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return rerr
	}
	if werr != nil {
		return fileError(ctx, "upload", "", werr)
	}
	return nil
}

// sendBatch sends next's files as a batch's tar and its tar-end. Small
// files' headers and data are gathered into few frames; big pieces go out
// as they are.
func sendBatch(fw *wire.FrameWriter, next func() (wire.UploadItem, io.Reader, error), sent *sentFiles) error {
	buf := fileSendBufs.Get().(*[wire.FileChunk]byte)
	defer fileSendBufs.Put(buf)
	bw := &safetar.BatchWriter{Max: wire.FileChunk, Buf: buf[:0], Send: func(b []byte) error { return fw.WriteFrame(wire.FrameTar, b) }}
	var hdr []byte // one entry's header blocks, reused
	for n := 0; ; n++ {
		item, r, err := next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return &sourceError{err}
		}
		if n >= wire.MaxBulkFiles {
			return &fileClassError{&wire.RemoteError{Message: fmt.Sprintf("upload: more than %d files in one call", wire.MaxBulkFiles), Code: wire.CodeResourceExhausted}, errdefs.ErrResourceExhausted}
		}
		// Recorded before the header goes out, so the init's result for
		// this file always finds it.
		counted := sent.add(item.Path)
		if hdr, err = sendBatchFile(bw, hdr, item, r, counted); err != nil {
			return err
		}
	}
	if _, err := bw.Write(safetar.Trailer()); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return fw.WriteFrame(wire.FrameTarEnd, nil)
}

// batchEntry is the name, mode and PAX records of a batch file's entries
// (see wire.UploadArgs).
func batchEntry(item wire.UploadItem) (name string, mode int64, pax map[string]string) {
	name = item.Path
	switch {
	case item.Mode == nil:
		mode = wire.BatchModeNone
	case *item.Mode > 0o7777:
		pax = map[string]string{wire.PAXMode: strconv.FormatUint(uint64(*item.Mode), 10)}
	default:
		mode = int64(*item.Mode)
	}
	if strings.IndexByte(item.Path, 0) >= 0 {
		// tar names cannot hold NUL; the init refuses the path by itself.
		if pax == nil {
			pax = map[string]string{}
		}
		name, pax[wire.PAXPath] = "nul", item.Path
	}
	return name, mode, pax
}

// sendBatchFile writes one file to w: an entry per piece of its data (the
// first names the file, the others continue it), at least one. hdr is a
// buffer for the headers. A failure of r is a *sourceError.
func sendBatchFile(w io.Writer, hdr []byte, item wire.UploadItem, r io.Reader, counted *atomic.Int64) ([]byte, error) {
	name, mode, pax := batchEntry(item)
	piece := func(b []byte) error {
		var err error
		if hdr, err = safetar.AppendFileHeader(hdr[:0], name, mode, int64(len(b)), pax); err != nil {
			return err
		}
		counted.Add(int64(len(b)))
		for _, p := range [][]byte{hdr, b, safetar.Pad(int64(len(b)))} {
			if _, err := w.Write(p); err != nil {
				return err
			}
		}
		if _, ok := pax[wire.PAXAppend]; !ok {
			pax = maps.Clone(pax)
			if pax == nil {
				pax = map[string]string{}
			}
			pax[wire.PAXAppend] = "1"
		}
		return nil
	}
	first := true
	err := eachPiece(r, func(b []byte) error {
		first = false
		return piece(b)
	})
	if err == nil && first {
		err = piece(nil)
	}
	return hdr, err
}

// eachPiece hands r's data to f: a ChunkSource's pieces as they are,
// other readers' in chunks of up to FileChunk. A failure of r is a
// *sourceError.
func eachPiece(r io.Reader, f func([]byte) error) error {
	if r == nil {
		return nil
	}
	if cs, ok := r.(ChunkSource); ok {
		for {
			b, err := cs.NextChunk()
			if len(b) > 0 {
				if ferr := f(b); ferr != nil {
					return ferr
				}
			}
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return &sourceError{err}
			}
		}
	}
	buf := fileSendBufs.Get().(*[wire.FileChunk]byte)
	defer fileSendBufs.Put(buf)
	for {
		n, err := io.ReadFull(r, buf[:])
		if n > 0 {
			if ferr := f(buf[:n]); ferr != nil {
				return ferr
			}
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil
		}
		if err != nil {
			return &sourceError{err}
		}
	}
}

// readUploadResults reads an upload's results up to its final ok frame.
// The init is not trusted to report them honestly: there must be one result
// per file sent, in order, none for a file not sent yet, with a size no
// larger than what was sent, and its path is the one boxd sent. So what
// boxd keeps and passes on is bounded by what the caller uploaded.
func (cn *conn) readUploadResults(sent *sentFiles, result func(wire.FileResult) error) error {
	next := 0
	err := cn.readResults("upload", func(p []byte) error {
		if len(p) > MaxControlPayload {
			return fmt.Errorf("%w: upload result of %d bytes", wire.ErrProtocol, len(p))
		}
		var r wire.FileResult
		if err := json.Unmarshal(p, &r); err != nil {
			return fmt.Errorf("%w: malformed upload result: %v", wire.ErrProtocol, err)
		}
		path, size, ok := sent.get(next)
		switch {
		case !ok:
			return fmt.Errorf("%w: upload result %d for a file not sent", wire.ErrProtocol, next)
		case r.Index != next:
			return fmt.Errorf("%w: upload result for file %d where %d was next", wire.ErrProtocol, r.Index, next)
		case r.Size < 0 || r.Size > size:
			return fmt.Errorf("%w: upload result says %d bytes for file %d, %d were sent", wire.ErrProtocol, r.Size, next, size)
		}
		next++
		boundResult(&r, path)
		if result == nil {
			return nil
		}
		if err := result(r); err != nil {
			cn.c.Close()
			return &handlerError{err}
		}
		return nil
	}, func([]byte) error {
		if n := sent.len(); next != n {
			return fmt.Errorf("%w: %d results for %d files in the upload", wire.ErrProtocol, next, n)
		}
		return nil
	})
	return fileError(context.Background(), "upload", "", err)
}

// maxResultMessage bounds the error text kept from one file's result: a
// real one is a line.
const maxResultMessage = 1024

// boundResult replaces what the init said a file's path was with the path
// boxd asked for, and cuts its error code and message to a sane length.
func boundResult(r *wire.FileResult, path string) {
	r.Path = path
	if len(r.Code) > 64 || !utf8.ValidString(r.Code) {
		r.Code = wire.CodeInternal
	}
	r.Message = strings.ToValidUTF8(r.Message, "\uFFFD")
	if len(r.Message) > maxResultMessage {
		r.Message = strings.ToValidUTF8(r.Message[:maxResultMessage], "") + "…"
	}
}

// sentFiles records an upload's files as they go out: the writer adds one
// before its header is sent, and its byte count grows as its data is read,
// so at any moment it is at least what the init can have received
// (sendChunks counts a frame before writing it).
type sentFiles struct {
	mu    sync.Mutex
	paths []string
	sizes []*atomic.Int64
}

func (s *sentFiles) add(path string) *atomic.Int64 {
	n := new(atomic.Int64)
	s.mu.Lock()
	s.paths = append(s.paths, path)
	s.sizes = append(s.sizes, n)
	s.mu.Unlock()
	return n
}

func (s *sentFiles) get(i int) (path string, size int64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i < 0 || i >= len(s.paths) {
		return "", 0, false
	}
	return s.paths[i], s.sizes[i].Load(), true
}

func (s *sentFiles) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.paths)
}

// DownloadHandler receives the files of DownloadFiles in order: Start and
// Data (payloads valid only during the call) for each file that could be
// opened, then Done for every file, with the error if it failed.
type DownloadHandler struct {
	Start func(index int, fi wire.FileStat) error
	Data  func(index int, p []byte) error
	Done  func(r wire.FileResult) error
}

// DownloadFiles reads many files in one operation: a copy-out whose tar is
// the batch's (see wire.DownloadArgs). A file that cannot be read gets an
// error in its Done; the others go on.
func (c *Client) DownloadFiles(ctx context.Context, a wire.DownloadArgs, h DownloadHandler) error {
	args, err := json.Marshal(a)
	if err != nil {
		return fileError(ctx, "download", "", err)
	}
	// An init that knows only trees refuses BatchPath.
	cn, err := c.open(ctx, wire.Request{Op: wire.OpCopyOut, Path: wire.BatchPath, Args: args})
	if err != nil {
		return fileError(ctx, "download", "", err)
	}
	defer cn.close()
	d := &downloadReader{paths: a.Paths, h: h, current: -1}
	buf := fileSendBufs.Get().(*[wire.FileChunk]byte)
	defer fileSendBufs.Put(buf)
	d.buf = buf[:]
	r := wire.NewFrameDataReader(cn.fr, wire.FrameTar, wire.FrameTarEnd, true)
	err = readBatch(r, d.entry)
	if err == nil {
		err = d.end()
	}
	if err == nil {
		// Up to tar-end: the padding after the end-of-archive marker.
		_, err = io.Copy(io.Discard, r)
	}
	if err == nil && d.next != len(a.Paths) {
		err = fmt.Errorf("%w: %d of %d files in the download", wire.ErrProtocol, d.next, len(a.Paths))
	}
	return fileError(ctx, "download", "", err)
}

// downloadReader turns a batch's tar into a DownloadHandler's calls. The
// init is not trusted: entries must come in the batch's form and order,
// no more files than were asked for, each result carries the path boxd
// asked for and the size boxd counted, and what the init says is bounded.
type downloadReader struct {
	paths   []string
	h       DownloadHandler
	buf     []byte
	current int // index of the file whose data is flowing, or -1
	next    int // index of the next file to begin
	size    int64
}

func (d *downloadReader) entry(hdr *batchFile, data io.Reader) error {
	if len(hdr.Name) > safetar.MaxNameLen {
		return fmt.Errorf("%w: download entry's name of %d bytes", wire.ErrProtocol, len(hdr.Name))
	}
	code, failed := hdr.Records[wire.PAXCode]
	if _, more := hdr.Records[wire.PAXAppend]; more {
		if d.current < 0 {
			return fmt.Errorf("%w: download data continues no file", wire.ErrProtocol)
		}
		if failed {
			return d.fail(hdr, code)
		}
		return d.data(data)
	}
	if err := d.end(); err != nil {
		return err
	}
	if d.next >= len(d.paths) {
		return fmt.Errorf("%w: more files than the %d asked for", wire.ErrProtocol, len(d.paths))
	}
	d.current, d.size = d.next, 0
	d.next++
	if failed {
		return d.fail(hdr, code)
	}
	fi, err := downloadStat(hdr)
	if err != nil {
		return err
	}
	if d.h.Start != nil {
		if err := d.h.Start(d.current, fi); err != nil {
			return &handlerError{err}
		}
	}
	return d.data(data)
}

// downloadStat describes a downloaded file from its first entry.
func downloadStat(hdr *batchFile) (wire.FileStat, error) {
	fi := wire.FileStat{Path: strings.ToValidUTF8(hdr.Name, "\uFFFD"), Type: wire.FileTypeRegular, Size: hdr.Size,
		Mode: uint32(hdr.Mode & 0o7777), Mtime: hdr.ModTime}
	fi.Name = path.Base(fi.Path)
	if hdr.UID < 0 || hdr.GID < 0 || hdr.UID > math.MaxUint32 || hdr.GID > math.MaxUint32 {
		return fi, fmt.Errorf("%w: download entry owned by %d:%d", wire.ErrProtocol, hdr.UID, hdr.GID)
	}
	fi.UID, fi.GID = uint32(hdr.UID), uint32(hdr.GID)
	if v, ok := hdr.Records[wire.PAXSize]; ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return fi, fmt.Errorf("%w: download entry of size %q", wire.ErrProtocol, v)
		}
		fi.Size = n
	}
	return fi, nil
}

// data hands an entry's data to the handler, counting it.
func (d *downloadReader) data(r io.Reader) error {
	for {
		n, err := r.Read(d.buf)
		if n > 0 {
			d.size += int64(n)
			if d.h.Data != nil {
				if herr := d.h.Data(d.current, d.buf[:n]); herr != nil {
					return &handlerError{herr}
				}
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// fail ends the current file with the error an entry carries.
func (d *downloadReader) fail(hdr *batchFile, code string) error {
	if hdr.Size != 0 {
		return fmt.Errorf("%w: a failed file's entry carries data", wire.ErrProtocol)
	}
	return d.done(code, hdr.Records[wire.PAXMessage])
}

// end ends the current file, if any, as read whole.
func (d *downloadReader) end() error {
	if d.current < 0 {
		return nil
	}
	return d.done("", "")
}

func (d *downloadReader) done(code, msg string) error {
	r := wire.FileResult{Index: d.current, Size: d.size, Code: code, Message: msg}
	if code == "" && msg != "" {
		r.Code = wire.CodeInternal
	}
	d.current = -1
	boundResult(&r, d.paths[r.Index])
	if d.h.Done != nil {
		if err := d.h.Done(r); err != nil {
			return &handlerError{err}
		}
	}
	return nil
}

// Watch reports changes under a path inside the sandbox until ctx ends
// (returning ctx's error) or the path itself goes away (returning nil).
// ready, if not nil, is called once the watches are in place: changes
// after it are reported. events receives batches in order.
func (c *Client) Watch(ctx context.Context, a wire.WatchArgs, ready func(), events func([]wire.WatchEvent) error) error {
	cn, err := c.openFileOp(ctx, wire.OpFileWatch, a)
	if err != nil {
		return fileError(ctx, "watch", a.Path, err)
	}
	defer cn.close()
	if err := cn.readReply(wire.FrameOK, nil); err != nil {
		return fileError(ctx, "watch", a.Path, err)
	}
	if ready != nil {
		ready()
	}
	err = cn.readResults("watch", func(p []byte) error {
		var evs []wire.WatchEvent
		if err := json.Unmarshal(p, &evs); err != nil {
			return fmt.Errorf("%w: malformed watch frame: %v", wire.ErrProtocol, err)
		}
		if events == nil {
			return nil
		}
		return handlerErr(events(evs))
	}, nil)
	return fileError(ctx, "watch", a.Path, err)
}
