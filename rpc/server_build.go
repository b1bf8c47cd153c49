//go:build linux

package rpc

import (
	"context"
	"errors"
	"io"

	"connectrpc.com/connect"

	"github.com/boxd-dev/boxd/internal/dockerfile"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/runtime"
)

func (s *Server) BuildImage(ctx context.Context, stream *connect.ClientStream[boxdv1.BuildImageRequest]) (*connect.Response[boxdv1.BuildImageResponse], error) {
	if !stream.Receive() {
		if err := stream.Err(); err != nil {
			return nil, ToConnect(err)
		}
		return nil, invalid("build: empty request stream (the first message must carry ref and dockerfile)")
	}
	first := stream.Msg()
	if first.Ref == "" {
		return nil, invalid("ref: empty in the first message")
	}
	if len(first.Dockerfile) == 0 {
		return nil, invalid("dockerfile: empty in the first message")
	}
	m := &boxdv1.BuildImageRequest{Ref: first.Ref, Dockerfile: first.Dockerfile, BuildArgs: first.BuildArgs, Force: first.Force, NoCache: first.NoCache}
	bctx, err := dockerfile.ReadContext(&contextReader{cur: first.Context, next: func() ([]byte, error) {
		if !stream.Receive() {
			if err := stream.Err(); err != nil {
				return nil, err
			}
			return nil, io.EOF
		}
		return stream.Msg().Context, nil
	}})
	if err != nil {
		return nil, ToConnect(err)
	}
	opts := s.imageWrite(ctx, m.Force)
	res, err := s.Manager.Build(ctx, runtime.BuildRequest{
		Ref: m.Ref, Dockerfile: m.Dockerfile, BuildArgs: m.BuildArgs, Context: bctx, NoCache: m.NoCache, Opts: opts,
	}, nil)
	if err != nil {
		return nil, ToConnect(err)
	}
	if res.Image.Replaced != "" {
		s.Log.Warn("image replaced (forced) by a build", "image", res.Image.Name, "digest", res.Image.Digest, "replaced_digest", res.Image.Replaced, "caller", opts.Caller)
	}
	out := &boxdv1.BuildImageResponse{Image: imageProto(res.Image)}
	for _, st := range res.Steps {
		out.Steps = append(out.Steps, &boxdv1.BuildStep{Line: uint32(st.Line), Instruction: st.Instruction, Cached: st.Cached, DurationMs: st.Took.Milliseconds()})
	}
	return connect.NewResponse(out), nil
}

// contextReader reads the context bytes of a build's messages in order.
type contextReader struct {
	cur  []byte
	next func() ([]byte, error)
	err  error
}

func (r *contextReader) Read(p []byte) (int, error) {
	for len(r.cur) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		b, err := r.next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				err = ToConnect(err)
			}
			r.err = err
			continue
		}
		r.cur = b
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}
