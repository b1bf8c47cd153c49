package boxd

import (
	"context"

	"connectrpc.com/connect"

	"github.com/boxd-dev/boxd/rpc/apiwire"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// Since values for DiffOptions; any other is the name of an image
// committed from the sandbox.
const (
	SinceCreate = "create"
	SinceFork   = "fork"
)

// DiffOptions say what Diff compares with and whether it adds patches.
type DiffOptions struct {
	// Since: SinceCreate (the default: the image the sandbox was made
	// from), SinceFork (its source's files when it was forked), or an
	// image committed from the sandbox.
	Since string
	// Patch adds a unified diff to each changed text file (1 MiB a file,
	// 16 MiB in all; past them PatchTruncated).
	Patch bool
}

// Changes are the files added, modified and deleted in a sandbox's
// writable layer, in path order.
type Changes struct {
	Entries []*boxdv1.DiffEntry
	// Truncated: the listing stopped at boxd's limit (100,000 changes).
	Truncated bool
	// PatchTruncated: some patch was cut or left out.
	PatchTruncated bool
}

// Diff lists what changed in the sandbox's files (volumes and binds
// excluded): "what did the agent change", in one call.
func (s *Sandbox) Diff(ctx context.Context, o DiffOptions) (*Changes, error) {
	stream, err := s.c.api.Sandboxes.DiffSandbox(ctx, connect.NewRequest(&boxdv1.DiffSandboxRequest{SandboxId: s.ID, Since: o.Since, Patch: o.Patch}))
	if err != nil {
		return nil, wrap(err)
	}
	defer stream.Close()
	out := &Changes{}
	done := false
	for stream.Receive() {
		m := stream.Msg()
		out.Entries = append(out.Entries, m.Entries...)
		done, out.Truncated, out.PatchTruncated = m.Done, m.Truncated, m.PatchTruncated
	}
	if err := stream.Err(); err != nil {
		return nil, wrap(err)
	}
	if !done {
		return nil, newError(connect.CodeUnavailable, apiwire.LostConnection+": the diff ended early")
	}
	return out, nil
}
