package mcpserver

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"connectrpc.com/connect"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/boxd-dev/boxd/rpc/apiwire"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

const (
	defaultReadBytes = 256 << 10
	maxReadBytes     = 4 << 20
	// maxListEntries bounds list_files' answer; a model reads every line.
	maxListEntries = 1000
	// writeChunk is the data per WriteFile message, below the API's
	// message bound.
	writeChunk = apiwire.ChunkBytes
)

type readIn struct {
	SandboxID string `json:"sandbox_id" jsonschema:"id or name of the sandbox"`
	Path      string `json:"path" jsonschema:"file to read; relative paths start at the sandbox's workdir"`
	Offset    int64  `json:"offset,omitempty" jsonschema:"first byte to read; default 0"`
	Length    int64  `json:"length,omitempty" jsonschema:"bytes to read; default 262144, at most 4194304"`
}

type readOut struct {
	Path      string `json:"path"`
	Size      int64  `json:"size" jsonschema:"size of the whole file"`
	Offset    int64  `json:"offset"`
	Length    int64  `json:"length" jsonschema:"bytes returned"`
	Encoding  string `json:"encoding" jsonschema:"utf-8, or base64 for a file that is not UTF-8 text"`
	Content   string `json:"content"`
	Truncated bool   `json:"truncated" jsonschema:"the file goes on past what was returned"`
}

type writeIn struct {
	SandboxID string `json:"sandbox_id" jsonschema:"id or name of the sandbox"`
	Path      string `json:"path" jsonschema:"file to write (replaced atomically); missing parent directories are created"`
	Content   string `json:"content" jsonschema:"the file's new content, as text"`
	Base64    bool   `json:"base64,omitempty" jsonschema:"content is base64 of binary data"`
	Mode      string `json:"mode,omitempty" jsonschema:"permission bits in octal, e.g. 0755; default: the old file's, or 0644"`
}

type writeOut struct {
	Path  string `json:"path"`
	Bytes int    `json:"bytes"`
}

type listFilesIn struct {
	SandboxID string `json:"sandbox_id" jsonschema:"id or name of the sandbox"`
	Path      string `json:"path,omitempty" jsonschema:"directory to list; default the sandbox's workdir"`
	Depth     int32  `json:"depth,omitempty" jsonschema:"levels to list: 1 (default) the directory's entries, 2 also their children, and so on, at most 64"`
}

type entryOut struct {
	Path string `json:"path"`
	Type string `json:"type" jsonschema:"file, dir, symlink or other"`
	Size int64  `json:"size"`
	Mode string `json:"mode" jsonschema:"permission bits in octal"`
	Link string `json:"link_target,omitempty"`
}

type listFilesOut struct {
	Entries   []entryOut `json:"entries"`
	Truncated bool       `json:"truncated"`
}

type editIn struct {
	SandboxID  string `json:"sandbox_id" jsonschema:"id or name of the sandbox"`
	Path       string `json:"path" jsonschema:"UTF-8 text file to edit"`
	OldText    string `json:"old_text" jsonschema:"exact text to replace; it must occur once unless replace_all"`
	NewText    string `json:"new_text" jsonschema:"replacement text"`
	ReplaceAll bool   `json:"replace_all,omitempty" jsonschema:"replace every occurrence instead of requiring exactly one"`
}

type editOut struct {
	Path         string `json:"path"`
	Replacements int    `json:"replacements"`
	Line         int64  `json:"line" jsonschema:"the line where the first replacement starts"`
}

func (s *Server) addFiles(srv *mcp.Server) {
	addTool(s, srv, &mcp.Tool{
		Name:        "read_file",
		Description: "Read a file in a sandbox, or a byte range of it. Text comes back as is; a file that is not UTF-8 comes back as base64.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, s.readFile)
	addTool(s, srv, &mcp.Tool{
		Name:        "write_file",
		Description: "Create or replace a file in a sandbox (atomically), creating missing parent directories.",
	}, s.writeFile)
	addTool(s, srv, &mcp.Tool{
		Name:        "list_files",
		Description: "List a directory in a sandbox: one line per entry with type, size, mode and path. Symlinks are listed, not entered.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, s.listFiles)
	addTool(s, srv, &mcp.Tool{
		Name:        "edit_file",
		Description: "Edit a file in a sandbox by exact replacement: old_text must occur exactly once (or use replace_all); otherwise nothing changes. The file is replaced atomically, keeping its owner and mode.",
	}, s.editFile)
}

// read returns up to length bytes of path from offset, and the file's size.
func (s *Server) read(ctx context.Context, id, path string, offset, length int64) ([]byte, int64, error) {
	stream, err := s.files.ReadFile(ctx, connect.NewRequest(&boxdv1.ReadFileRequest{SandboxId: id, Path: path, Offset: offset, Length: length}))
	if err != nil {
		return nil, 0, err
	}
	defer stream.Close()
	var data []byte
	var size int64
	for stream.Receive() {
		m := stream.Msg()
		if m.GetInfo() != nil {
			size = m.GetInfo().GetSize()
		}
		data = append(data, m.GetData()...)
		if int64(len(data)) > length {
			return nil, 0, fmt.Errorf("boxd sent more than the %d bytes asked for", length)
		}
	}
	return data, size, stream.Err()
}

func (s *Server) write(ctx context.Context, id, path string, data []byte, mode *uint32) error {
	stream := s.files.WriteFile(ctx)
	first := true
	for first || len(data) > 0 {
		n := min(len(data), writeChunk)
		msg := &boxdv1.WriteFileRequest{Data: data[:n]}
		if first {
			msg.SandboxId, msg.Path, msg.Mode, msg.Parents = id, path, mode, true
			first = false
		}
		data = data[n:]
		if err := stream.Send(msg); err != nil {
			if errors.Is(err, io.EOF) {
				break // the server ended the call: its answer says why
			}
			return err
		}
	}
	_, err := stream.CloseAndReceive()
	return err
}

func (s *Server) readFile(ctx context.Context, _ *mcp.CallToolRequest, in readIn) (*mcp.CallToolResult, readOut, error) {
	if in.SandboxID == "" || in.Path == "" {
		return nil, readOut{}, fmt.Errorf("sandbox_id and path are required")
	}
	length := int64(defaultReadBytes)
	if in.Length < 0 || in.Length > maxReadBytes || in.Offset < 0 {
		return nil, readOut{}, fmt.Errorf("length %d and offset %d: length must be between 0 and %d, offset not negative", in.Length, in.Offset, maxReadBytes)
	} else if in.Length > 0 {
		length = in.Length
	}
	data, size, err := s.read(ctx, in.SandboxID, in.Path, in.Offset, length)
	if err != nil {
		return nil, readOut{}, describe("read "+in.Path, err)
	}
	out := readOut{Path: in.Path, Size: size, Offset: in.Offset, Length: int64(len(data)), Encoding: "utf-8", Truncated: in.Offset+int64(len(data)) < size}
	var b strings.Builder
	if utf8.Valid(data) {
		out.Content = string(data)
	} else {
		out.Encoding, out.Content = "base64", base64.StdEncoding.EncodeToString(data)
		fmt.Fprintf(&b, "[%s is not UTF-8 text: its %d bytes follow as base64]\n", in.Path, len(data))
	}
	if out.Truncated {
		fmt.Fprintf(&b, "[showing bytes %d to %d of %d; read on with offset %d]\n", in.Offset, in.Offset+out.Length, size, in.Offset+out.Length)
	}
	b.WriteString(out.Content)
	return text(b.String()), out, nil
}

func (s *Server) writeFile(ctx context.Context, _ *mcp.CallToolRequest, in writeIn) (*mcp.CallToolResult, writeOut, error) {
	if in.SandboxID == "" || in.Path == "" {
		return nil, writeOut{}, fmt.Errorf("sandbox_id and path are required")
	}
	data := []byte(in.Content)
	if in.Base64 {
		var err error
		if data, err = base64.StdEncoding.DecodeString(in.Content); err != nil {
			return nil, writeOut{}, fmt.Errorf("content is not base64: %w", err)
		}
	}
	var mode *uint32
	if in.Mode != "" {
		m, err := strconv.ParseUint(in.Mode, 8, 32)
		if err != nil || m > 0o7777 {
			return nil, writeOut{}, fmt.Errorf("mode %q: want octal permission bits such as 0644 (at most 07777)", in.Mode)
		}
		mode = ptr(uint32(m))
	}
	if err := s.write(ctx, in.SandboxID, in.Path, data, mode); err != nil {
		return nil, writeOut{}, describe("write "+in.Path, err)
	}
	return text(fmt.Sprintf("wrote %d bytes to %s", len(data), in.Path)), writeOut{Path: in.Path, Bytes: len(data)}, nil
}

func typeName(t boxdv1.FileType) string {
	switch t {
	case boxdv1.FileType_FILE_TYPE_REGULAR:
		return "file"
	case boxdv1.FileType_FILE_TYPE_DIRECTORY:
		return "dir"
	case boxdv1.FileType_FILE_TYPE_SYMLINK:
		return "symlink"
	}
	return "other"
}

func (s *Server) listFiles(ctx context.Context, _ *mcp.CallToolRequest, in listFilesIn) (*mcp.CallToolResult, listFilesOut, error) {
	if in.SandboxID == "" {
		return nil, listFilesOut{}, fmt.Errorf("sandbox_id is required")
	}
	if in.Depth < 0 || in.Depth > 64 {
		return nil, listFilesOut{}, fmt.Errorf("depth %d: must be between 1 and 64", in.Depth)
	}
	path := in.Path
	if path == "" {
		path = "."
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the listing once enough entries arrived
	stream, err := s.files.ListDir(ctx, connect.NewRequest(&boxdv1.ListDirRequest{SandboxId: in.SandboxID, Path: path, Depth: in.Depth}))
	if err != nil {
		return nil, listFilesOut{}, describe("list "+path, err)
	}
	defer stream.Close()
	out := listFilesOut{Entries: []entryOut{}}
	var b strings.Builder
	for !out.Truncated && stream.Receive() {
		for _, e := range stream.Msg().GetEntries() {
			if len(out.Entries) == maxListEntries {
				out.Truncated = true
				break
			}
			eo := entryOut{Path: e.GetPath(), Type: typeName(e.GetType()), Size: e.GetSize(), Mode: fmt.Sprintf("%04o", e.GetMode()), Link: e.GetLinkTarget()}
			out.Entries = append(out.Entries, eo)
			fmt.Fprintf(&b, "%-7s %10d %s %s", eo.Type, eo.Size, eo.Mode, eo.Path)
			if eo.Link != "" {
				fmt.Fprintf(&b, " -> %s", eo.Link)
			}
			b.WriteString("\n")
		}
	}
	if err := stream.Err(); err != nil && !out.Truncated {
		return nil, listFilesOut{}, describe("list "+path, err)
	}
	if out.Truncated {
		fmt.Fprintf(&b, "[listing truncated at %d entries; list a subdirectory or a smaller depth]\n", maxListEntries)
	}
	if len(out.Entries) == 0 {
		b.WriteString("(empty directory)\n")
	}
	return text(b.String()), out, nil
}

// editFile is the server-side EditFile: boxd's init replaces the text
// inside the sandbox and renames the result into place, so the file never
// travels to this process and back, and a concurrent change in between is
// not overwritten.
func (s *Server) editFile(ctx context.Context, _ *mcp.CallToolRequest, in editIn) (*mcp.CallToolResult, editOut, error) {
	if in.SandboxID == "" || in.Path == "" || in.OldText == "" {
		return nil, editOut{}, fmt.Errorf("sandbox_id, path and old_text are required")
	}
	res, err := s.files.EditFile(ctx, connect.NewRequest(&boxdv1.EditFileRequest{
		SandboxId: in.SandboxID, Path: in.Path, OldString: in.OldText, NewString: in.NewText, ReplaceAll: in.ReplaceAll,
	}))
	if err != nil {
		return nil, editOut{}, describe("edit "+in.Path, err)
	}
	n := int(res.Msg.Replacements)
	return text(fmt.Sprintf("replaced %d occurrence(s) in %s, the first at line %d", n, in.Path, res.Msg.Line)), editOut{Path: in.Path, Replacements: n, Line: res.Msg.Line}, nil
}
