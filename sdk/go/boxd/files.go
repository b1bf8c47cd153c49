package boxd

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"

	"connectrpc.com/connect"

	"github.com/boxd-dev/boxd/rpc/apiwire"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// Files is a sandbox's file API. Data of any size moves as a stream of
// chunks (apiwire.ChunkBytes each), so no call meets the API's message
// limit.
type Files struct{ sb *Sandbox }

// FileInfo describes a file in a sandbox (path, type, size, mode, mtime,
// owner).
type FileInfo = boxdv1.FileInfo

// WriteOptions change how WriteFrom writes.
type WriteOptions struct {
	Mode      os.FileMode // permission bits; 0: 0644 for a new file, the old mode for a replaced one
	User      string      // write as this user (NAME, UID, ...); default the sandbox's
	NoParents bool        // fail if the parent directory is missing instead of creating it
	Append    bool        // append to the file instead of replacing it
}

// Write writes data to the file at path, replacing it atomically if it
// exists, creating missing parent directories.
func (f *Files) Write(ctx context.Context, path string, data []byte) error {
	_, err := f.WriteFrom(ctx, path, bytes.NewReader(data), WriteOptions{})
	return err
}

// WriteFrom writes what r yields, to its end, to the file at path and
// returns the bytes written.
func (f *Files) WriteFrom(ctx context.Context, path string, r io.Reader, o WriteOptions) (int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // a read error abandons the upload
	st := f.sb.c.api.Files.WriteFile(ctx)
	first := &boxdv1.WriteFileRequest{SandboxId: f.sb.ID, Path: path, User: o.User, Parents: !o.NoParents, Append: o.Append}
	if o.Mode != 0 {
		m := uint32(o.Mode.Perm())
		first.Mode = &m
	}
	buf := make([]byte, apiwire.ChunkBytes)
	msg := first
	for {
		n, rerr := io.ReadFull(r, buf)
		if n > 0 || msg == first {
			msg.Data = buf[:n]
			if err := st.Send(msg); err != nil {
				if errors.Is(err, io.EOF) {
					break // boxd answered early: CloseAndReceive says why
				}
				return 0, wrap(err)
			}
			msg = &boxdv1.WriteFileRequest{}
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return 0, rerr
		}
	}
	res, err := st.CloseAndReceive()
	if err != nil {
		return 0, wrap(err)
	}
	return res.Msg.GetBytesWritten(), nil
}

// Read returns the content of the file at path.
func (f *Files) Read(ctx context.Context, path string) ([]byte, error) {
	var b bytes.Buffer
	if _, err := f.ReadTo(ctx, path, &b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// ReadTo writes the content of the file at path to w as it arrives and
// returns the bytes written.
func (f *Files) ReadTo(ctx context.Context, path string, w io.Writer) (int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // a write error ends the download
	st, err := f.sb.c.api.Files.ReadFile(ctx, connect.NewRequest(&boxdv1.ReadFileRequest{SandboxId: f.sb.ID, Path: path}))
	if err != nil {
		return 0, wrap(err)
	}
	defer st.Close()
	var n int64
	for st.Receive() {
		data := st.Msg().GetData()
		m, err := w.Write(data)
		n += int64(m)
		apiwire.RecycleChunk(data)
		if err != nil {
			return n, err
		}
	}
	return n, wrap(st.Err())
}

// Stat describes the file at path (a final symlink itself, not its
// target).
func (f *Files) Stat(ctx context.Context, path string) (*FileInfo, error) {
	res, err := f.sb.c.api.Files.StatFile(ctx, connect.NewRequest(&boxdv1.StatFileRequest{SandboxId: f.sb.ID, Path: path}))
	if err != nil {
		return nil, wrap(err)
	}
	return res.Msg.GetInfo(), nil
}

// List returns the entries of the directory at path.
func (f *Files) List(ctx context.Context, path string) ([]*FileInfo, error) {
	st, err := f.sb.c.api.Files.ListDir(ctx, connect.NewRequest(&boxdv1.ListDirRequest{SandboxId: f.sb.ID, Path: path}))
	if err != nil {
		return nil, wrap(err)
	}
	defer st.Close()
	var out []*FileInfo
	for st.Receive() {
		out = append(out, st.Msg().GetEntries()...)
	}
	return out, wrap(st.Err())
}

// MkdirAll makes the directory at path and any missing parents.
func (f *Files) MkdirAll(ctx context.Context, path string) error {
	_, err := f.sb.c.api.Files.MakeDir(ctx, connect.NewRequest(&boxdv1.MakeDirRequest{SandboxId: f.sb.ID, Path: path, Parents: true}))
	return wrap(err)
}

// Remove removes the file or empty directory at path; RemoveAll, a
// directory with everything in it.
func (f *Files) Remove(ctx context.Context, path string) error {
	return f.remove(ctx, path, false)
}

// RemoveAll removes path and everything under it.
func (f *Files) RemoveAll(ctx context.Context, path string) error {
	return f.remove(ctx, path, true)
}

func (f *Files) remove(ctx context.Context, path string, recursive bool) error {
	_, err := f.sb.c.api.Files.RemovePath(ctx, connect.NewRequest(&boxdv1.RemovePathRequest{SandboxId: f.sb.ID, Path: path, Recursive: recursive}))
	return wrap(err)
}
