package mcpserver

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"connectrpc.com/connect"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// maxDiffPatchText bounds the patches one sandbox_diff answer carries; a
// model reads every line.
const maxDiffPatchText = 256 << 10

type diffIn struct {
	SandboxID string `json:"sandbox_id" jsonschema:"id or name of the sandbox"`
	Since     string `json:"since,omitempty" jsonschema:"create (default: the image it was made from), fork (its source's files when it was forked), or an image committed from it"`
	Patch     bool   `json:"patch,omitempty" jsonschema:"add a unified diff of each changed text file"`
}

type diffEntryOut struct {
	Change string `json:"change" jsonschema:"added, modified or deleted"`
	Path   string `json:"path"`
	Type   string `json:"type" jsonschema:"file, dir, symlink or other"`
	Size   int64  `json:"size"`
	Mode   string `json:"mode" jsonschema:"permission bits in octal"`
	Link   string `json:"link_target,omitempty"`
	Patch  string `json:"patch,omitempty"`
	Binary bool   `json:"binary,omitempty"`
}

type diffOut struct {
	Entries        []diffEntryOut `json:"entries"`
	Truncated      bool           `json:"truncated" jsonschema:"more changes than listed"`
	PatchTruncated bool           `json:"patch_truncated" jsonschema:"some patch was cut or left out"`
}

func (s *Server) addDiff(srv *mcp.Server) {
	addTool(s, srv, &mcp.Tool{
		Name: "sandbox_diff",
		Description: "List the files added (A), modified (M) and deleted (D) in a sandbox since it was created " +
			"(or forked, or committed as an image), optionally with unified diffs of text files. Volumes are not included.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, s.diff)
}

var diffLetters = map[boxdv1.DiffChange]string{
	boxdv1.DiffChange_DIFF_CHANGE_ADDED:    "A",
	boxdv1.DiffChange_DIFF_CHANGE_MODIFIED: "M",
	boxdv1.DiffChange_DIFF_CHANGE_DELETED:  "D",
}

// quoted is a path as it is, or quoted when a character in it could
// forge a line of the answer.
func quoted(p string) string {
	if strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '"' || r == '\\' || r == utf8.RuneError }) {
		return strconv.Quote(p)
	}
	return p
}

var diffWords = map[boxdv1.DiffChange]string{
	boxdv1.DiffChange_DIFF_CHANGE_ADDED:    "added",
	boxdv1.DiffChange_DIFF_CHANGE_MODIFIED: "modified",
	boxdv1.DiffChange_DIFF_CHANGE_DELETED:  "deleted",
}

func (s *Server) diff(ctx context.Context, _ *mcp.CallToolRequest, in diffIn) (*mcp.CallToolResult, diffOut, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the listing once enough entries arrived
	stream, err := s.api.DiffSandbox(ctx, connect.NewRequest(&boxdv1.DiffSandboxRequest{SandboxId: in.SandboxID, Since: in.Since, Patch: in.Patch}))
	if err != nil {
		return nil, diffOut{}, describe("diff", err)
	}
	defer stream.Close()
	out := diffOut{Entries: []diffEntryOut{}}
	var b strings.Builder
	patchBytes := 0
	for stream.Receive() {
		m := stream.Msg()
		out.Truncated, out.PatchTruncated = out.Truncated || m.Truncated, out.PatchTruncated || m.PatchTruncated
		for _, e := range m.GetEntries() {
			if len(out.Entries) == maxListEntries {
				out.Truncated = true
				break
			}
			eo := diffEntryOut{Change: diffWords[e.Change], Path: e.Path, Type: typeName(e.Type), Size: e.Size,
				Mode: fmt.Sprintf("%04o", e.Mode), Link: e.LinkTarget, Binary: e.Binary}
			if patchBytes+len(e.Patch) <= maxDiffPatchText {
				eo.Patch, patchBytes = e.Patch, patchBytes+len(e.Patch)
			} else {
				out.PatchTruncated = true
			}
			out.Entries = append(out.Entries, eo)
			fmt.Fprintf(&b, "%s %s\n", diffLetters[e.Change], quoted(eo.Path))
			b.WriteString(eo.Patch)
		}
		if out.Truncated {
			break
		}
	}
	if err := stream.Err(); err != nil && !out.Truncated {
		return nil, diffOut{}, describe("diff", err)
	}
	if out.Truncated {
		fmt.Fprintf(&b, "[listing truncated at %d changes]\n", len(out.Entries))
	}
	if out.PatchTruncated {
		b.WriteString("[some patches were cut or left out]\n")
	}
	if len(out.Entries) == 0 {
		b.WriteString("(no changes)\n")
	}
	return text(b.String()), out, nil
}
