//go:build linux

package rpc

import (
	"context"
	"errors"
	"time"

	"connectrpc.com/connect"

	"github.com/boxd-dev/boxd/agent/wire"
	"github.com/boxd-dev/boxd/rpc/apiwire"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
	"github.com/boxd-dev/boxd/runtime"
)

// volumeServer implements boxdv1connect.VolumeServiceHandler: thin over
// the runtime's volumes room, which checks ownership.
type volumeServer struct{ s *Server }

var _ boxdv1connect.VolumeServiceHandler = (*volumeServer)(nil)

func volumeProto(v *runtime.Volume) *boxdv1.Volume {
	out := &boxdv1.Volume{Id: v.ID, Name: v.Name, SizeBytes: v.SizeBytes, UsedBytes: v.UsedBytes, OwnerUid: v.Owner,
		Labels: v.Labels, CreatedAt: v.CreatedAt.Format(time.RFC3339), Shared: v.Shared, Snapshots: v.Snapshots}
	for _, u := range v.Mounts {
		out.Mounts = append(out.Mounts, &boxdv1.VolumeMount{SandboxId: u.SandboxID, Path: u.Path, ReadOnly: u.ReadOnly, Volume: v.Name, VolumeId: v.ID})
	}
	return out
}

func (v *volumeServer) CreateVolume(ctx context.Context, req *connect.Request[boxdv1.CreateVolumeRequest]) (*connect.Response[boxdv1.CreateVolumeResponse], error) {
	m := req.Msg
	vol, err := v.s.Manager.CreateVolume(ctx, runtime.VolumeRequest{Name: m.Name, Size: m.Size, Labels: m.Labels, Shared: m.Shared, From: m.From})
	if err != nil {
		return nil, ToConnect(err)
	}
	return connect.NewResponse(&boxdv1.CreateVolumeResponse{Volume: volumeProto(vol)}), nil
}

func (v *volumeServer) ListVolumes(ctx context.Context, _ *connect.Request[boxdv1.ListVolumesRequest]) (*connect.Response[boxdv1.ListVolumesResponse], error) {
	out := &boxdv1.ListVolumesResponse{}
	for _, vol := range v.s.Manager.ListVolumes(ctx) {
		out.Volumes = append(out.Volumes, volumeProto(&vol))
	}
	return connect.NewResponse(out), nil
}

func (v *volumeServer) GetVolume(ctx context.Context, req *connect.Request[boxdv1.GetVolumeRequest]) (*connect.Response[boxdv1.GetVolumeResponse], error) {
	vol, err := v.s.Manager.GetVolume(ctx, req.Msg.Name)
	if err != nil {
		return nil, ToConnect(err)
	}
	return connect.NewResponse(&boxdv1.GetVolumeResponse{Volume: volumeProto(vol)}), nil
}

func (v *volumeServer) RemoveVolume(ctx context.Context, req *connect.Request[boxdv1.RemoveVolumeRequest]) (*connect.Response[boxdv1.RemoveVolumeResponse], error) {
	if err := v.s.Manager.RemoveVolume(ctx, req.Msg.Name, req.Msg.Force); err != nil {
		return nil, ToConnect(err)
	}
	return connect.NewResponse(&boxdv1.RemoveVolumeResponse{}), nil
}

func (v *volumeServer) SnapshotVolume(ctx context.Context, req *connect.Request[boxdv1.SnapshotVolumeRequest]) (*connect.Response[boxdv1.SnapshotVolumeResponse], error) {
	vol, err := v.s.Manager.SnapshotVolume(ctx, req.Msg.Name, req.Msg.Snapshot)
	if err != nil {
		return nil, ToConnect(err)
	}
	return connect.NewResponse(&boxdv1.SnapshotVolumeResponse{Volume: volumeProto(vol)}), nil
}

func (v *volumeServer) CopyIntoVolume(ctx context.Context, stream *connect.ClientStream[boxdv1.CopyIntoVolumeRequest]) (*connect.Response[boxdv1.CopyIntoVolumeResponse], error) {
	if !stream.Receive() {
		if err := stream.Err(); err != nil {
			return nil, ToConnect(err)
		}
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("copy into volume: empty request stream (the first message must name name and path)"))
	}
	first := stream.Msg()
	if first.Name == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("name: empty in the first message"))
	}
	r := &messageChunks{first: first.Data, recv: func() ([]byte, bool, error) {
		if !stream.Receive() {
			return nil, false, streamEnd(ctx, stream.Err())
		}
		return stream.Msg().Data, true, nil
	}}
	if err := v.s.Manager.VolumeCopyIn(ctx, first.Name, first.Path, r); err != nil {
		return nil, ToConnect(err)
	}
	return connect.NewResponse(&boxdv1.CopyIntoVolumeResponse{}), nil
}

// volumeOutWriter sends a volume's tar as messages of up to
// apiwire.ChunkBytes.
type volumeOutWriter struct {
	stream *connect.ServerStream[boxdv1.CopyFromVolumeResponse]
	msg    boxdv1.CopyFromVolumeResponse
}

func (w *volumeOutWriter) Write(p []byte) (int, error) {
	for off := 0; off < len(p); off += apiwire.ChunkBytes {
		w.msg.Data = p[off:min(off+apiwire.ChunkBytes, len(p))]
		err := w.stream.Send(&w.msg)
		w.msg.Data = nil
		if err != nil {
			return off, err
		}
	}
	return len(p), nil
}

func (v *volumeServer) CopyFromVolume(ctx context.Context, req *connect.Request[boxdv1.CopyFromVolumeRequest], stream *connect.ServerStream[boxdv1.CopyFromVolumeResponse]) error {
	return ToConnect(v.s.Manager.VolumeCopyOut(ctx, req.Msg.Name, req.Msg.Path, &volumeOutWriter{stream: stream}))
}

func (v *volumeServer) StatVolumePath(ctx context.Context, req *connect.Request[boxdv1.StatVolumePathRequest]) (*connect.Response[boxdv1.StatVolumePathResponse], error) {
	fi, err := v.s.Manager.StatVolumePath(ctx, req.Msg.Name, req.Msg.Path)
	if err != nil {
		return nil, ToConnect(err)
	}
	return connect.NewResponse(&boxdv1.StatVolumePathResponse{Info: fileInfo(fi)}), nil
}

func (v *volumeServer) ListVolumeDir(ctx context.Context, req *connect.Request[boxdv1.ListVolumeDirRequest]) (*connect.Response[boxdv1.ListVolumeDirResponse], error) {
	entries, truncated, err := v.s.Manager.ListVolumeDir(ctx, req.Msg.Name, req.Msg.Path)
	if err != nil {
		return nil, ToConnect(err)
	}
	out := &boxdv1.ListVolumeDirResponse{Truncated: truncated}
	for _, e := range entries {
		out.Entries = append(out.Entries, fileInfo(e))
	}
	return connect.NewResponse(out), nil
}

// volumeFileWriter sends a volume file's bytes as messages of up to
// apiwire.ChunkBytes, the first carrying its description.
type volumeFileWriter struct {
	stream *connect.ServerStream[boxdv1.ReadVolumeFileResponse]
	msg    boxdv1.ReadVolumeFileResponse
}

func (w *volumeFileWriter) Write(p []byte) (int, error) {
	for off := 0; off < len(p); off += apiwire.ChunkBytes {
		w.msg.Data = p[off:min(off+apiwire.ChunkBytes, len(p))]
		err := w.stream.Send(&w.msg)
		w.msg.Data, w.msg.Info = nil, nil
		if err != nil {
			return off, err
		}
	}
	return len(p), nil
}

func (v *volumeServer) ReadVolumeFile(ctx context.Context, req *connect.Request[boxdv1.ReadVolumeFileRequest], stream *connect.ServerStream[boxdv1.ReadVolumeFileResponse]) error {
	w := &volumeFileWriter{stream: stream}
	err := v.s.Manager.ReadVolumeFile(ctx, req.Msg.Name, req.Msg.Path, func(fi wire.FileStat) error {
		w.msg.Info = fileInfo(fi)
		return nil
	}, w)
	if err == nil && w.msg.Info != nil {
		// An empty file: its description alone.
		err = stream.Send(&w.msg)
	}
	return ToConnect(err)
}
