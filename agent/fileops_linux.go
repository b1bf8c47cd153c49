//go:build linux

package agent

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"

	"github.com/boxd-dev/boxd/safetar"
)

func (s *Server) stat(fw *FrameWriter, path string) {
	p, err := s.resolve(path)
	if err != nil {
		s.replyError(fw, "stat "+path, err)
		return
	}
	fi, err := os.Lstat(p)
	if err != nil {
		s.replyError(fw, "stat "+path, err)
		return
	}
	info := FileInfo{
		Name:  fi.Name(),
		Size:  fi.Size(),
		Mode:  fi.Mode(),
		IsDir: fi.IsDir(),
		Mtime: fi.ModTime(),
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		info.LinkTarget, _ = os.Readlink(p)
	}
	fw.WriteJSON(FrameResult, info)
}

// copyIn extracts the tar that follows the request with docker cp semantics:
// into dest if dest is a directory, else as dest (the tar's top-level entry
// renamed to base(dest)) inside dest's parent, which must exist.
func (s *Server) copyIn(fr *FrameReader, fw *FrameWriter, dest string) {
	p, err := s.resolve(dest)
	if err != nil {
		s.replyError(fw, "copy-in "+dest, err)
		return
	}
	dir, rename := p, ""
	if fi, err := os.Stat(p); err != nil || !fi.IsDir() {
		dir, rename = filepath.Dir(p), filepath.Base(p)
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			s.replyError(fw, "copy-in "+dest, &RemoteError{
				Message: fmt.Sprintf("%s: no such directory", dir),
				Code:    CodeNotFound,
			})
			return
		}
	}
	tarStream := &frameDataReader{fr: fr, data: FrameTar, end: FrameTarEnd}
	if err := safetar.Extract(tarStream, dir, rename); err != nil {
		if errors.Is(err, safetar.ErrUnsafe) {
			err = &RemoteError{Message: err.Error(), Code: CodeInvalidArgument}
		}
		s.replyError(fw, "copy-in "+dest, err)
		return
	}
	// The tar reader stops at the end-of-archive marker; consume the
	// padding after it so the reply follows the host's tar-end.
	if _, err := io.Copy(io.Discard, tarStream); err != nil {
		s.replyError(fw, "copy-in "+dest, err)
		return
	}
	fw.WriteFrame(FrameOK, nil)
}

// copyOut sends a tar of path whose single top-level entry is base(path).
func (s *Server) copyOut(conn net.Conn, fw *FrameWriter, path string) {
	p, err := s.resolve(path)
	if err != nil {
		s.replyError(fw, "copy-out "+path, err)
		return
	}
	if p == "/" {
		s.replyError(fw, "copy-out "+path, fmt.Errorf("%w: cannot copy out /: a tar needs a top-level name", errInvalid))
		return
	}
	if _, err := os.Lstat(p); err != nil {
		s.replyError(fw, "copy-out "+path, err)
		return
	}
	setFileSocketBuffer(conn)
	bw := &frameBuffer{fw: fw, t: FrameTar}
	err = safetar.Write(bw, p, filepath.Base(p))
	if err == nil {
		err = bw.Flush()
	}
	bw.release()
	if err != nil {
		// The host discards the partial tar when an error frame ends it.
		s.replyError(fw, "copy-out "+path, err)
		return
	}
	fw.WriteFrame(FrameTarEnd, nil)
}

// bigWrite is the smallest write frameBuffer sends as it is rather than
// copying it.
const bigWrite = 64 << 10

// frameBuffer sends what is written to it as frames of type t: small
// writes (tar headers and padding, small files) gathered into frames of up
// to FileChunk bytes, big ones (file data) as they are, without a copy.
type frameBuffer struct {
	fw  *FrameWriter
	t   FrameType
	buf *[FileChunk]byte // from fileReadBufs once needed
	n   int
}

func (b *frameBuffer) Write(p []byte) (int, error) {
	if len(p) >= bigWrite {
		if err := b.Flush(); err != nil {
			return 0, err
		}
		for off := 0; off < len(p); off += FileChunk {
			if err := b.fw.WriteFrame(b.t, p[off:min(off+FileChunk, len(p))]); err != nil {
				return off, err
			}
		}
		return len(p), nil
	}
	if b.buf == nil {
		b.buf = fileReadBufs.Get().(*[FileChunk]byte)
	}
	if b.n+len(p) > len(b.buf) {
		if err := b.Flush(); err != nil {
			return 0, err
		}
	}
	b.n += copy(b.buf[b.n:], p)
	return len(p), nil
}

// Flush sends what is buffered.
func (b *frameBuffer) Flush() error {
	if b.n == 0 {
		return nil
	}
	err := b.fw.WriteFrame(b.t, b.buf[:b.n])
	b.n = 0
	return err
}

// release returns the buffer to its pool; b must not be used afterwards.
func (b *frameBuffer) release() {
	if b.buf != nil {
		fileReadBufs.Put(b.buf)
		b.buf = nil
	}
}
