//go:build linux

package rpc

import (
	"context"

	"connectrpc.com/connect"

	"github.com/boxd-dev/boxd/agent/wire"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// The agent file helpers of FileService (ReadLines, EditFile, Glob, Grep,
// ChownPath).

func apiLine(l wire.Line) *boxdv1.Line {
	return &boxdv1.Line{Number: l.N, Text: l.T, Cut: l.Cut}
}

func (f *fileServer) ReadLines(ctx context.Context, req *connect.Request[boxdv1.ReadLinesRequest]) (*connect.Response[boxdv1.ReadLinesResponse], error) {
	m := req.Msg
	res, err := f.s.Manager.ReadLines(ctx, m.SandboxId, wire.ReadLinesArgs{
		Path: m.Path, User: m.User, Offset: m.Offset, Limit: int(m.Limit), MaxLineBytes: int(m.MaxLineBytes),
	})
	if err != nil {
		return nil, ToConnect(err)
	}
	out := &boxdv1.ReadLinesResponse{
		Info: fileInfo(res.Stat), Lines: make([]*boxdv1.Line, len(res.Lines)),
		MoreLines: !res.EOF, NextOffset: m.Offset + int64(len(res.Lines)), Binary: res.Binary,
	}
	for i, l := range res.Lines {
		out.Lines[i] = apiLine(l)
	}
	return connect.NewResponse(out), nil
}

func (f *fileServer) EditFile(ctx context.Context, req *connect.Request[boxdv1.EditFileRequest]) (*connect.Response[boxdv1.EditFileResponse], error) {
	m := req.Msg
	res, err := f.s.Manager.EditFile(ctx, m.SandboxId, wire.EditArgs{Path: m.Path, User: m.User, Old: m.OldString, New: m.NewString, All: m.ReplaceAll})
	if err != nil {
		return nil, ToConnect(err)
	}
	return connect.NewResponse(&boxdv1.EditFileResponse{Replacements: int32(res.Replacements), Line: res.Line, Info: fileInfo(res.Stat)}), nil
}

func (f *fileServer) Glob(ctx context.Context, req *connect.Request[boxdv1.GlobRequest]) (*connect.Response[boxdv1.GlobResponse], error) {
	m := req.Msg
	found, sum, err := f.s.Manager.Glob(ctx, m.SandboxId, wire.GlobArgs{Pattern: m.Pattern, Path: m.Path, User: m.User, Limit: int(m.Limit)})
	if err != nil {
		return nil, ToConnect(err)
	}
	out := &boxdv1.GlobResponse{Matches: make([]*boxdv1.FileInfo, len(found)), Truncated: sum.Truncated, TruncatedReason: sum.Reason}
	for i, fi := range found {
		out.Matches[i] = fileInfo(fi)
	}
	return connect.NewResponse(out), nil
}

func (f *fileServer) Grep(ctx context.Context, req *connect.Request[boxdv1.GrepRequest]) (*connect.Response[boxdv1.GrepResponse], error) {
	m := req.Msg
	found, sum, err := f.s.Manager.Grep(ctx, m.SandboxId, wire.GrepArgs{
		Pattern: m.Pattern, Path: m.Path, Glob: m.Glob, User: m.User, Limit: int(m.Limit),
		IgnoreCase: m.IgnoreCase, Literal: m.Literal, MaxLineBytes: int(m.MaxLineBytes),
	})
	if err != nil {
		return nil, ToConnect(err)
	}
	out := &boxdv1.GrepResponse{Matches: make([]*boxdv1.GrepMatch, len(found)), Truncated: sum.Truncated, TruncatedReason: sum.Reason}
	for i, g := range found {
		out.Matches[i] = &boxdv1.GrepMatch{Path: g.Path, Binary: g.Binary}
		if !g.Binary {
			out.Matches[i].Line = apiLine(g.Line)
		}
	}
	return connect.NewResponse(out), nil
}

func (f *fileServer) ChownPath(ctx context.Context, req *connect.Request[boxdv1.ChownPathRequest]) (*connect.Response[boxdv1.ChownPathResponse], error) {
	m := req.Msg
	if err := f.s.Manager.ChownPath(ctx, m.SandboxId, wire.ChownArgs{Path: m.Path, User: m.User, Owner: m.Owner, Recursive: m.Recursive}); err != nil {
		return nil, ToConnect(err)
	}
	return connect.NewResponse(&boxdv1.ChownPathResponse{}), nil
}
