//go:build linux

package rpc

import (
	"context"
	"strings"
	"unicode/utf8"

	"connectrpc.com/connect"
	"golang.org/x/sys/unix"

	"github.com/boxd-dev/boxd/internal/layerdiff"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/runtime"
)

// diffBatchBytes is about how much one DiffSandbox message carries: well
// under the API's message limit even with a whole 1 MiB patch in it.
const diffBatchBytes = 1 << 20

// DiffSandbox lists what changed in a sandbox's files, in batches.
func (s *Server) DiffSandbox(ctx context.Context, req *connect.Request[boxdv1.DiffSandboxRequest], stream *connect.ServerStream[boxdv1.DiffSandboxResponse]) error {
	m := req.Msg
	res, err := s.Manager.Diff(ctx, runtime.DiffRequest{Sandbox: m.SandboxId, Since: m.Since, Patch: m.Patch})
	if err != nil {
		return ToConnect(err)
	}
	msg := &boxdv1.DiffSandboxResponse{}
	size := 0
	for i := range res.Changes {
		e := diffEntryProto(&res.Changes[i])
		n := len(e.Path) + len(e.RawPath) + len(e.LinkTarget) + len(e.Patch) + 64
		if size+n > diffBatchBytes && len(msg.Entries) > 0 {
			if err := stream.Send(msg); err != nil {
				return err
			}
			msg, size = &boxdv1.DiffSandboxResponse{}, 0
		}
		msg.Entries = append(msg.Entries, e)
		size += n
	}
	msg.Done, msg.Truncated, msg.PatchTruncated = true, res.Truncated, res.PatchTruncated
	return stream.Send(msg)
}

var diffChangeProto = map[layerdiff.ChangeKind]boxdv1.DiffChange{
	layerdiff.Added:    boxdv1.DiffChange_DIFF_CHANGE_ADDED,
	layerdiff.Modified: boxdv1.DiffChange_DIFF_CHANGE_MODIFIED,
	layerdiff.Deleted:  boxdv1.DiffChange_DIFF_CHANGE_DELETED,
}

var modeTypeProto = map[uint32]boxdv1.FileType{
	unix.S_IFREG:  boxdv1.FileType_FILE_TYPE_REGULAR,
	unix.S_IFDIR:  boxdv1.FileType_FILE_TYPE_DIRECTORY,
	unix.S_IFLNK:  boxdv1.FileType_FILE_TYPE_SYMLINK,
	unix.S_IFIFO:  boxdv1.FileType_FILE_TYPE_FIFO,
	unix.S_IFSOCK: boxdv1.FileType_FILE_TYPE_SOCKET,
	unix.S_IFCHR:  boxdv1.FileType_FILE_TYPE_CHAR_DEVICE,
	unix.S_IFBLK:  boxdv1.FileType_FILE_TYPE_BLOCK_DEVICE,
}

// diffEntryProto turns a change into its message. The names are the
// sandbox's, any bytes at all: protobuf strings must be UTF-8, so a path
// that is not keeps its bytes in raw_path.
func diffEntryProto(c *layerdiff.Change) *boxdv1.DiffEntry {
	e := &boxdv1.DiffEntry{
		Path: c.Path, Change: diffChangeProto[c.Kind], Type: modeTypeProto[c.Mode&unix.S_IFMT],
		Size: c.Size, Mode: c.Mode & 0o7777, Uid: uint32(c.UID), Gid: uint32(c.GID),
		LinkTarget: strings.ToValidUTF8(c.LinkTarget, "\uFFFD"),
		Patch:      string(c.Patch), Binary: c.Binary, PatchTruncated: c.PatchCut,
	}
	if !utf8.ValidString(c.Path) {
		e.Path, e.RawPath = strings.ToValidUTF8(c.Path, "\uFFFD"), []byte(c.Path)
	}
	return e
}
