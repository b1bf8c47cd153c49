//go:build linux

package insandbox

import (
	"archive/tar"
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/boxd-dev/boxd/agent/wire"
	"github.com/boxd-dev/boxd/internal/safetar"
)

// copyPlacer places the entries of a copy-in's tar: a tree under one
// destination (treePlacer) or a batch of files, each at its own path
// (batchPlacer). The tar is read in one place, copyIn.
type copyPlacer interface {
	entry(hdr *tar.Header, data io.Reader) error
	// finish runs after the archive's end, before the reply.
	finish() error
	// idle runs when the next read may wait for the host.
	idle() error
	// reply answers the copy: ok, or err.
	reply(err error)
}

// copyIn is every copy into the sandbox: `boxctl cp` and image builds'
// COPY (a tree, docker cp rules, as root) and FileService.UploadFiles (a
// batch of files as a user, each with its result). Both are a tar after
// the request, read here by one reader; only where entries go differs.
func (s *Server) copyIn(conn net.Conn, fr *wire.FrameReader, fw *wire.FrameWriter, req *wire.Request) {
	var pl copyPlacer
	var ok bool
	if len(req.Args) > 0 {
		pl, ok = s.batchPlacer(conn, fw, req)
	} else {
		pl, ok = s.treePlacer(fw, req.Path)
	}
	if !ok {
		return
	}
	tarStream := wire.NewFrameDataReader(fr, wire.FrameTar, wire.FrameTarEnd, false)
	tarStream.Idle = pl.idle
	err := safetar.ReadEntries(tarStream, pl.entry)
	if err == nil {
		err = pl.finish()
	}
	if err == nil {
		// The tar reader stops at the end-of-archive marker; consume the
		// padding after it so the reply follows the host's tar-end.
		_, err = io.Copy(io.Discard, tarStream)
	}
	pl.reply(err)
}

// tree places a tar with docker cp semantics: into dest if dest is a
// directory, else as dest (the tar's top-level entry renamed to
// base(dest)) inside dest's parent, which must exist.
type tree struct {
	s    *Server
	fw   *wire.FrameWriter
	dest string
	x    *safetar.Extractor
}

func (s *Server) treePlacer(fw *wire.FrameWriter, dest string) (copyPlacer, bool) {
	fail := func(err error) (copyPlacer, bool) {
		s.replyError(fw, "copy-in "+dest, err)
		return nil, false
	}
	p, err := s.resolve(dest)
	if err != nil {
		return fail(err)
	}
	dir, rename := p, ""
	if fi, err := os.Stat(p); err != nil || !fi.IsDir() {
		dir, rename = filepath.Dir(p), filepath.Base(p)
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return fail(&wire.RemoteError{Message: fmt.Sprintf("%s: no such directory", dir), Code: wire.CodeNotFound})
		}
	}
	// The tar comes from the host's side; its symlinks point into the
	// sandbox's own root whatever they say, so they are kept as they are.
	x, err := safetar.NewExtractor(dir, safetar.Options{Rename: rename, Links: safetar.LinksKeep, SkipDevices: true})
	if err != nil {
		return fail(err)
	}
	return &tree{s: s, fw: fw, dest: dest, x: x}, true
}

func (t *tree) entry(hdr *tar.Header, data io.Reader) error { return t.x.Entry(hdr, data) }
func (t *tree) finish() error                               { return t.x.Finish() }
func (t *tree) idle() error                                 { return nil }

func (t *tree) reply(err error) {
	if err = t.x.Close(err); err != nil {
		if errors.Is(err, safetar.ErrUnsafe) {
			err = &wire.RemoteError{Message: err.Error(), Code: wire.CodeInvalidArgument}
		}
		t.s.replyError(t.fw, "copy-in "+t.dest, err)
		return
	}
	t.fw.WriteFrame(wire.FrameOK, nil)
}

// batch places a batch's files (wire.UploadArgs), each written like
// file-write as the batch's user. A file that fails (bad path, permission
// denied, disk full) gets an error result and its data is skipped; the
// others go on. Results stream back as each file ends, so the host must
// read them while it sends.
type batch struct {
	s       *Server
	fw      *wire.FrameWriter // errors of the whole batch
	bw      *bufio.Writer     // results, flushed whenever a read may wait
	rw      *wire.FrameWriter
	id      *fsIdentity
	parents bool
	dirs    fsDirCache
	buf     *[wire.FileChunk]byte
	files   int // files begun
	// The file being written: its result so far, its target (nil if it
	// could not be opened, err then says why) and a failed write.
	open      bool
	res       wire.FileResult
	t         *fsWriteTarget
	err, werr error
}

func (s *Server) batchPlacer(conn net.Conn, fw *wire.FrameWriter, req *wire.Request) (copyPlacer, bool) {
	if req.Path != wire.BatchPath {
		s.replyError(fw, "upload", fmt.Errorf("%w: copy-in with both a path and upload arguments", wire.ErrInvalid))
		return nil, false
	}
	var a wire.UploadArgs
	id, ok := s.fileSetup(fw, &wire.Request{Op: wire.OpFileUpload, Args: req.Args}, &a, func() string { return a.User })
	if !ok {
		return nil, false
	}
	bw := bufio.NewWriterSize(conn, 16<<10)
	return &batch{s: s, fw: fw, bw: bw, rw: wire.NewFrameWriter(bw), id: id, parents: a.Parents,
		buf: fileReadBufs.Get().(*[wire.FileChunk]byte)}, true
}

func (b *batch) idle() error { return b.bw.Flush() }

func (b *batch) entry(hdr *tar.Header, data io.Reader) error {
	if hdr.Typeflag != tar.TypeReg {
		return fmt.Errorf("%w: upload entry %q is not a regular file", wire.ErrInvalid, hdr.Name)
	}
	for k := range hdr.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return fmt.Errorf("%w: upload entry %q is sparse", wire.ErrInvalid, hdr.Name)
		}
	}
	if _, ok := hdr.PAXRecords[wire.PAXAppend]; ok {
		if !b.open {
			return fmt.Errorf("%w: upload data continues no file", wire.ErrInvalid)
		}
		return b.write(data)
	}
	if err := b.end(); err != nil {
		return err
	}
	if b.files >= wire.MaxBulkFiles {
		return &wire.RemoteError{
			Message: fmt.Sprintf("upload: more than %d files in one call", wire.MaxBulkFiles),
			Code:    wire.CodeResourceExhausted,
		}
	}
	mode, err := batchMode(hdr)
	if err != nil {
		return err
	}
	path := hdr.Name
	if p, ok := hdr.PAXRecords[wire.PAXPath]; ok {
		path = p
	}
	b.open, b.res, b.t, b.werr = true, wire.FileResult{Index: b.files, Path: path}, nil, nil
	b.files++
	p, err := cleanFilePath(b.s.workdir(), path)
	if err == nil {
		b.t, err = fsOpenWriteTarget(b.id, p, &wire.FileWriteArgs{Path: p, Mode: mode, Parents: b.parents}, &b.dirs)
	}
	b.err = err
	return b.write(data)
}

// batchMode is an entry's mode, nil for none.
func batchMode(hdr *tar.Header) (*uint32, error) {
	v, ok := hdr.PAXRecords[wire.PAXMode]
	switch {
	case !ok && hdr.Mode == wire.BatchModeNone:
		return nil, nil
	case !ok:
		m := uint32(hdr.Mode)
		return &m, nil
	}
	m, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("%w: upload entry %q: mode %q", wire.ErrInvalid, hdr.Name, v)
	}
	m32 := uint32(m)
	return &m32, nil
}

// write writes an entry's data to the file being written, or skips it if
// the file failed; its error is only about the stream.
func (b *batch) write(data io.Reader) error {
	for {
		n, err := data.Read(b.buf[:])
		if n > 0 {
			if b.t != nil && b.werr == nil {
				b.werr = fsWriteAll(b.t.fd, b.buf[:n])
			}
			b.res.Size += int64(n)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// end finishes the file being written, if any, and sends its result.
func (b *batch) end() error {
	if !b.open {
		return nil
	}
	b.open = false
	res := &b.res
	switch {
	case b.err != nil:
		fsFailResult(res, "write", b.err)
	case b.werr != nil:
		b.t.abort()
		fsFailResult(res, "write", b.werr)
	default:
		if _, err := b.t.commit(false); err != nil {
			fsFailResult(res, "write", err)
		}
	}
	b.t = nil
	if res.Code != "" {
		res.Size = 0
	}
	if err := b.rw.WriteJSON(wire.FrameResult, *res); err != nil {
		return fmt.Errorf("%w: %v", errFileHostWrite, err)
	}
	return nil
}

func (b *batch) finish() error { return b.end() }

func (b *batch) reply(err error) {
	defer func() {
		b.dirs.close()
		fileReadBufs.Put(b.buf)
	}()
	if b.t != nil {
		b.t.abort() // the file in progress when the stream failed
	}
	if err == nil {
		b.rw.WriteFrame(wire.FrameOK, nil)
		b.bw.Flush()
		return
	}
	if errors.Is(err, errFileHostWrite) || fsHostGone(err) || b.bw.Flush() != nil {
		return // nobody to tell
	}
	b.s.replyError(b.fw, "upload", err)
}

// fsFailResult fills in why one file of a batch failed.
func fsFailResult(r *wire.FileResult, op string, err error) {
	re := fsFail(op, r.Path, err)
	r.Code, r.Message = re.Code, re.Message
}
