//go:build linux

package rpc

import (
	"context"
	"errors"
	"io"
	"sync"

	"connectrpc.com/connect"

	"github.com/boxd-dev/boxd/agent/host"
	"github.com/boxd-dev/boxd/agent/wire"
	"github.com/boxd-dev/boxd/rpc/apiwire"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
	"github.com/boxd-dev/boxd/runtime"
)

// fileServer implements FileService on the Server's Manager. It is a type
// of its own so its method names cannot collide with SandboxService's.
type fileServer struct{ s *Server }

var _ boxdv1connect.FileServiceHandler = (*fileServer)(nil)

var fileTypes = map[string]boxdv1.FileType{
	wire.FileTypeRegular: boxdv1.FileType_FILE_TYPE_REGULAR,
	wire.FileTypeDir:     boxdv1.FileType_FILE_TYPE_DIRECTORY,
	wire.FileTypeSymlink: boxdv1.FileType_FILE_TYPE_SYMLINK,
	wire.FileTypeFIFO:    boxdv1.FileType_FILE_TYPE_FIFO,
	wire.FileTypeSocket:  boxdv1.FileType_FILE_TYPE_SOCKET,
	wire.FileTypeChar:    boxdv1.FileType_FILE_TYPE_CHAR_DEVICE,
	wire.FileTypeBlock:   boxdv1.FileType_FILE_TYPE_BLOCK_DEVICE,
}

func fileInfo(fi wire.FileStat) *boxdv1.FileInfo {
	return &boxdv1.FileInfo{
		Path: fi.Path, Name: fi.Name, Type: fileTypes[fi.Type], Size: fi.Size, Mode: fi.Mode,
		Mtime: ts(fi.Mtime), LinkTarget: fi.LinkTarget, Uid: fi.UID, Gid: fi.GID, Error: fi.Error,
	}
}

// apiCodes names the init's error codes as the API does.
var apiCodes = map[string]connect.Code{
	wire.CodeNotFound:           connect.CodeNotFound,
	wire.CodeInvalidArgument:    connect.CodeInvalidArgument,
	wire.CodePermissionDenied:   connect.CodePermissionDenied,
	wire.CodeAlreadyExists:      connect.CodeAlreadyExists,
	wire.CodeFailedPrecondition: connect.CodeFailedPrecondition,
	wire.CodeResourceExhausted:  connect.CodeResourceExhausted,
	wire.CodeInternal:           connect.CodeInternal,
}

func fileResult(r wire.FileResult) *boxdv1.FileResult {
	out := &boxdv1.FileResult{Index: int32(r.Index), Path: r.Path, Size: r.Size}
	if r.Code != "" {
		code, ok := apiCodes[r.Code]
		if !ok {
			code = connect.CodeUnknown
		}
		out.Error = &boxdv1.FileError{Code: code.String(), Message: r.Message}
	}
	return out
}

var watchOps = map[string]boxdv1.WatchOp{
	wire.WatchCreate:   boxdv1.WatchOp_WATCH_OP_CREATE,
	wire.WatchWrite:    boxdv1.WatchOp_WATCH_OP_WRITE,
	wire.WatchRemove:   boxdv1.WatchOp_WATCH_OP_REMOVE,
	wire.WatchRename:   boxdv1.WatchOp_WATCH_OP_RENAME,
	wire.WatchChmod:    boxdv1.WatchOp_WATCH_OP_CHMOD,
	wire.WatchOverflow: boxdv1.WatchOp_WATCH_OP_OVERFLOW,
}

// messageChunks reads the data of a client stream's messages, handing each
// message's bytes on without a copy (host.ChunkSource). The messages'
// other fields are read only from the first. A chunk is used only until
// the next call, so its buffer then goes back to the codec's pool.
type messageChunks struct {
	first []byte
	recv  func() ([]byte, bool, error) // next message's data; false at the end
	cur   []byte
	last  []byte // the chunk handed out last
	done  bool
}

func (m *messageChunks) NextChunk() ([]byte, error) {
	apiwire.RecycleChunk(m.last)
	m.last = nil
	b, err := m.nextChunk()
	m.last = b
	return b, err
}

func (m *messageChunks) nextChunk() ([]byte, error) {
	if m.first != nil {
		b := m.first
		m.first = nil
		return b, nil
	}
	if m.done {
		return nil, io.EOF
	}
	b, ok, err := m.recv()
	if err != nil {
		return nil, err
	}
	if !ok {
		m.done = true
		return nil, io.EOF
	}
	return b, nil
}

func (m *messageChunks) Read(p []byte) (int, error) {
	for len(m.cur) == 0 {
		b, err := m.NextChunk()
		if err != nil {
			return 0, err
		}
		m.cur = b
	}
	n := copy(p, m.cur)
	m.cur = m.cur[n:]
	return n, nil
}

// streamEnd is the error of a client stream that stopped: a stream of a
// cancelled call is no complete file, even if its body ended cleanly (a
// client that cancels and then closes its side can send exactly that), so
// that nothing half-sent is ever committed.
func streamEnd(ctx context.Context, err error) error {
	if err == nil {
		err = ctx.Err()
	}
	return err
}

func emptyStream(stream interface{ Err() error }, what string) error {
	if err := stream.Err(); err != nil {
		return ToConnect(err)
	}
	return connect.NewError(connect.CodeInvalidArgument, errors.New(what+": empty request stream (the first message must name sandbox_id)"))
}

func (f *fileServer) WriteFile(ctx context.Context, stream *connect.ClientStream[boxdv1.WriteFileRequest]) (*connect.Response[boxdv1.WriteFileResponse], error) {
	if !stream.Receive() {
		return nil, emptyStream(stream, "write file")
	}
	m := stream.Msg()
	a := wire.FileWriteArgs{Path: m.Path, User: m.User, Mode: m.Mode, Parents: m.Parents, InPlace: m.InPlace, Append: m.Append, Exclusive: m.Exclusive}
	src := &messageChunks{first: m.Data, recv: func() ([]byte, bool, error) {
		if !stream.Receive() {
			return nil, false, streamEnd(ctx, stream.Err())
		}
		return stream.Msg().Data, true, nil
	}}
	res, err := f.s.Manager.WriteFile(ctx, m.SandboxId, a, src)
	if err != nil {
		return nil, ToConnect(err)
	}
	return connect.NewResponse(&boxdv1.WriteFileResponse{BytesWritten: res.Bytes, Info: fileInfo(res.Stat)}), nil
}

func (f *fileServer) ReadFile(ctx context.Context, req *connect.Request[boxdv1.ReadFileRequest], stream *connect.ServerStream[boxdv1.ReadFileResponse]) error {
	m := req.Msg
	rs, err := f.s.Manager.ReadFile(ctx, m.SandboxId, wire.FileReadArgs{Path: m.Path, User: m.User, Offset: m.Offset, Length: m.Length, NoFollow: m.NoFollow})
	if err != nil {
		return ToConnect(err)
	}
	defer rs.Close()
	if err := stream.Send(&boxdv1.ReadFileResponse{Info: fileInfo(rs.Stat)}); err != nil {
		return err
	}
	// Send marshals before it returns, so the init's frame buffer can go
	// straight into the message.
	msg := &boxdv1.ReadFileResponse{}
	for {
		b, err := rs.NextChunk()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return ToConnect(err)
		}
		msg.Data = b
		if err := stream.Send(msg); err != nil {
			return err
		}
	}
}

func (f *fileServer) StatFile(ctx context.Context, req *connect.Request[boxdv1.StatFileRequest]) (*connect.Response[boxdv1.StatFileResponse], error) {
	m := req.Msg
	fi, err := f.s.Manager.StatFile(ctx, m.SandboxId, wire.FileStatArgs{Path: m.Path, User: m.User, Follow: m.Follow})
	if err != nil {
		return nil, ToConnect(err)
	}
	return connect.NewResponse(&boxdv1.StatFileResponse{Info: fileInfo(fi)}), nil
}

func (f *fileServer) ListDir(ctx context.Context, req *connect.Request[boxdv1.ListDirRequest], stream *connect.ServerStream[boxdv1.ListDirResponse]) error {
	m := req.Msg
	err := f.s.Manager.ListDir(ctx, m.SandboxId, wire.FileListArgs{Path: m.Path, User: m.User, Depth: int(m.Depth)}, func(batch []wire.FileStat) error {
		out := &boxdv1.ListDirResponse{Entries: make([]*boxdv1.FileInfo, len(batch))}
		for i, fi := range batch {
			out.Entries[i] = fileInfo(fi)
		}
		return stream.Send(out)
	})
	return ToConnect(err)
}

func (f *fileServer) MakeDir(ctx context.Context, req *connect.Request[boxdv1.MakeDirRequest]) (*connect.Response[boxdv1.MakeDirResponse], error) {
	m := req.Msg
	if err := f.s.Manager.MakeDir(ctx, m.SandboxId, wire.FileMkdirArgs{Path: m.Path, User: m.User, Mode: m.Mode, Parents: m.Parents}); err != nil {
		return nil, ToConnect(err)
	}
	return connect.NewResponse(&boxdv1.MakeDirResponse{}), nil
}

func (f *fileServer) RemovePath(ctx context.Context, req *connect.Request[boxdv1.RemovePathRequest]) (*connect.Response[boxdv1.RemovePathResponse], error) {
	m := req.Msg
	if err := f.s.Manager.RemovePath(ctx, m.SandboxId, wire.FileRemoveArgs{Path: m.Path, User: m.User, Recursive: m.Recursive}); err != nil {
		return nil, ToConnect(err)
	}
	return connect.NewResponse(&boxdv1.RemovePathResponse{}), nil
}

func (f *fileServer) RenamePath(ctx context.Context, req *connect.Request[boxdv1.RenamePathRequest]) (*connect.Response[boxdv1.RenamePathResponse], error) {
	m := req.Msg
	if err := f.s.Manager.RenamePath(ctx, m.SandboxId, wire.FileRenameArgs{Src: m.Src, Dst: m.Dst, User: m.User, NoOverwrite: m.NoOverwrite}); err != nil {
		return nil, ToConnect(err)
	}
	return connect.NewResponse(&boxdv1.RenamePathResponse{}), nil
}

func (f *fileServer) ChmodPath(ctx context.Context, req *connect.Request[boxdv1.ChmodPathRequest]) (*connect.Response[boxdv1.ChmodPathResponse], error) {
	m := req.Msg
	if err := f.s.Manager.ChmodPath(ctx, m.SandboxId, wire.FileChmodArgs{Path: m.Path, User: m.User, Mode: m.Mode}); err != nil {
		return nil, ToConnect(err)
	}
	return connect.NewResponse(&boxdv1.ChmodPathResponse{}), nil
}

// uploadFiles splits an UploadFiles stream into files: a message with file
// starts one, messages with only data continue it.
type uploadFiles struct {
	ctx     context.Context
	stream  *connect.ClientStream[boxdv1.UploadFilesRequest]
	pending *boxdv1.UploadFilesRequest // received, not yet used
	ended   bool
}

func (u *uploadFiles) receive() (*boxdv1.UploadFilesRequest, error) {
	if m := u.pending; m != nil {
		u.pending = nil
		return m, nil
	}
	if u.ended {
		return nil, io.EOF
	}
	if !u.stream.Receive() {
		u.ended = true
		if err := streamEnd(u.ctx, u.stream.Err()); err != nil {
			return nil, err
		}
		return nil, io.EOF
	}
	return u.stream.Msg(), nil
}

func (u *uploadFiles) next() (wire.UploadItem, io.Reader, error) {
	for {
		m, err := u.receive()
		if err != nil {
			return wire.UploadItem{}, nil, err
		}
		if m.File == nil {
			if len(m.Data) > 0 {
				return wire.UploadItem{}, nil, connect.NewError(connect.CodeInvalidArgument, errors.New("file: data before the first file"))
			}
			continue // e.g. a first message with only sandbox_id
		}
		data := &messageChunks{first: m.Data, recv: func() ([]byte, bool, error) {
			m, err := u.receive()
			if err == io.EOF {
				return nil, false, nil
			}
			if err != nil {
				return nil, false, err
			}
			if m.File != nil {
				u.pending = m
				return nil, false, nil
			}
			return m.Data, true, nil
		}}
		return wire.UploadItem{Path: m.File.Path, Mode: m.File.Mode}, data, nil
	}
}

func (f *fileServer) UploadFiles(ctx context.Context, stream *connect.ClientStream[boxdv1.UploadFilesRequest]) (*connect.Response[boxdv1.UploadFilesResponse], error) {
	if !stream.Receive() {
		return nil, emptyStream(stream, "upload files")
	}
	first := stream.Msg()
	u := &uploadFiles{ctx: ctx, stream: stream, pending: first}
	out := &boxdv1.UploadFilesResponse{}
	var mu sync.Mutex // results arrive on the agent client's reader goroutine
	err := f.s.Manager.CopyIn(ctx, first.SandboxId, runtime.CopyIn{Files: &runtime.FileBatch{
		UploadArgs: wire.UploadArgs{User: first.User, Parents: first.Parents},
		Next:       u.next,
		Result: func(r wire.FileResult) error {
			mu.Lock()
			defer mu.Unlock()
			out.Results = append(out.Results, fileResult(r))
			if r.Code == "" {
				out.FilesWritten++
				out.BytesWritten += r.Size
			}
			return nil
		},
	}})
	if err != nil {
		var ce *connect.Error
		if errors.As(err, &ce) {
			return nil, ce // from u.next: the client's stream was malformed
		}
		return nil, ToConnect(err)
	}
	mu.Lock()
	defer mu.Unlock()
	return connect.NewResponse(out), nil
}

func (f *fileServer) DownloadFiles(ctx context.Context, req *connect.Request[boxdv1.DownloadFilesRequest], stream *connect.ServerStream[boxdv1.DownloadFilesResponse]) error {
	m := req.Msg
	msg := &boxdv1.DownloadFilesResponse{}
	send := func(index int, ev any) error {
		msg.Index = int32(index)
		switch ev := ev.(type) {
		case *boxdv1.FileInfo:
			msg.Event = &boxdv1.DownloadFilesResponse_Start{Start: ev}
		case []byte:
			msg.Event = &boxdv1.DownloadFilesResponse_Data{Data: ev}
		case *boxdv1.FileResult:
			msg.Event = &boxdv1.DownloadFilesResponse_Done{Done: ev}
		}
		return stream.Send(msg)
	}
	err := f.s.Manager.CopyOut(ctx, m.SandboxId, runtime.CopyOut{Files: &runtime.FileFetch{
		DownloadArgs: wire.DownloadArgs{Paths: m.Paths, User: m.User, NoFollow: m.NoFollow},
		DownloadHandler: host.DownloadHandler{
			Start: func(i int, fi wire.FileStat) error { return send(i, fileInfo(fi)) },
			Data:  func(i int, p []byte) error { return send(i, p) },
			Done:  func(r wire.FileResult) error { return send(r.Index, fileResult(r)) },
		},
	}})
	return ToConnect(err)
}

func (f *fileServer) WatchPath(ctx context.Context, req *connect.Request[boxdv1.WatchPathRequest], stream *connect.ServerStream[boxdv1.WatchPathResponse]) error {
	m := req.Msg
	var sendErr error
	err := f.s.Manager.WatchPath(ctx, m.SandboxId, wire.WatchArgs{Path: m.Path, User: m.User, Recursive: m.Recursive},
		func() { sendErr = stream.Send(&boxdv1.WatchPathResponse{Ready: true}) },
		func(evs []wire.WatchEvent) error {
			if sendErr != nil {
				return sendErr
			}
			out := &boxdv1.WatchPathResponse{Events: make([]*boxdv1.WatchEvent, len(evs))}
			for i, ev := range evs {
				out.Events[i] = &boxdv1.WatchEvent{Path: ev.Path, Op: watchOps[ev.Op], OldPath: ev.OldPath, IsDir: ev.IsDir, Message: ev.Message}
			}
			return stream.Send(out)
		})
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return nil // the client stopped watching: the normal end
	}
	if err == nil {
		err = sendErr
	}
	return ToConnect(err)
}
