//go:build linux

package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/boxd-dev/boxd/agent/host"
	"github.com/boxd-dev/boxd/agent/wire"
)

// File operations inside a sandbox, done by its init (host.Client); see
// wire.FileWriteArgs and friends for their semantics. The checks here
// name the request field; the init checks again, since it trusts nobody.

// fileFieldErr turns an agent argument error into one naming field.
func fileFieldErr(field string, err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "invalid argument: ")
	msg = strings.TrimPrefix(msg, field+": ")
	return fieldErr(field, "%s", msg)
}

func checkFilePath(field, p string) error {
	return fileFieldErr(field, wire.CheckFilePath(p))
}

func checkFileUser(u string) error {
	return fileFieldErr("user", wire.CheckUserSpec(u))
}

func checkFileMode(field string, mode *uint32) error {
	if mode != nil && *mode&^0o7777 != 0 {
		return fieldErr(field, "%#o has bits beyond 07777", *mode)
	}
	return nil
}

// fileAgent validates the common fields and finds the sandbox's init.
func (m *Manager) fileAgent(ctx context.Context, idOrName, user string, paths map[string]string) (*host.Client, string, error) {
	if idOrName == "" {
		return nil, "", fieldErr("sandbox_id", "empty")
	}
	for field, p := range paths {
		if err := checkFilePath(field, p); err != nil {
			return nil, "", err
		}
	}
	if err := checkFileUser(user); err != nil {
		return nil, "", err
	}
	return m.agentFor(ctx, idOrName)
}

// fileErr adds the sandbox to an error from its init, or explains that the
// sandbox is not running.
func (m *Manager) fileErr(ctx context.Context, id string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return m.notRunning(ctx, id, fmt.Errorf("sandbox %s: %w", id, err))
}

// WriteFile streams r into a file in the sandbox.
func (m *Manager) WriteFile(ctx context.Context, idOrName string, a wire.FileWriteArgs, r io.Reader) (wire.FileWriteResult, error) {
	if err := checkFileMode("mode", a.Mode); err != nil {
		return wire.FileWriteResult{}, err
	}
	c, id, err := m.fileAgent(ctx, idOrName, a.User, map[string]string{"path": a.Path})
	if err != nil {
		return wire.FileWriteResult{}, err
	}
	res, err := c.WriteFile(ctx, a, r)
	return res, m.fileErr(ctx, id, err)
}

// ReadFile opens a file in the sandbox; the caller closes the stream.
func (m *Manager) ReadFile(ctx context.Context, idOrName string, a wire.FileReadArgs) (*host.FileReadStream, error) {
	if a.Offset < 0 {
		return nil, fieldErr("offset", "%d is negative", a.Offset)
	}
	if a.Length < 0 {
		return nil, fieldErr("length", "%d is negative", a.Length)
	}
	c, id, err := m.fileAgent(ctx, idOrName, a.User, map[string]string{"path": a.Path})
	if err != nil {
		return nil, err
	}
	s, err := c.ReadFile(ctx, a)
	return s, m.fileErr(ctx, id, err)
}

// StatFile describes a path in the sandbox.
func (m *Manager) StatFile(ctx context.Context, idOrName string, a wire.FileStatArgs) (wire.FileStat, error) {
	c, id, err := m.fileAgent(ctx, idOrName, a.User, map[string]string{"path": a.Path})
	if err != nil {
		return wire.FileStat{}, err
	}
	fi, err := c.StatFile(ctx, a)
	return fi, m.fileErr(ctx, id, err)
}

// ListDir lists a directory in the sandbox in batches.
func (m *Manager) ListDir(ctx context.Context, idOrName string, a wire.FileListArgs, fn func([]wire.FileStat) error) error {
	c, id, err := m.fileAgent(ctx, idOrName, a.User, map[string]string{"path": a.Path})
	if err != nil {
		return err
	}
	return m.fileErr(ctx, id, c.ListDir(ctx, a, fn))
}

// MakeDir creates a directory in the sandbox.
func (m *Manager) MakeDir(ctx context.Context, idOrName string, a wire.FileMkdirArgs) error {
	if err := checkFileMode("mode", a.Mode); err != nil {
		return err
	}
	c, id, err := m.fileAgent(ctx, idOrName, a.User, map[string]string{"path": a.Path})
	if err != nil {
		return err
	}
	return m.fileErr(ctx, id, c.MakeDir(ctx, a))
}

// RemovePath removes a path (a tree with Recursive) in the sandbox.
func (m *Manager) RemovePath(ctx context.Context, idOrName string, a wire.FileRemoveArgs) error {
	c, id, err := m.fileAgent(ctx, idOrName, a.User, map[string]string{"path": a.Path})
	if err != nil {
		return err
	}
	return m.fileErr(ctx, id, c.RemovePath(ctx, a))
}

// RenamePath renames a path in the sandbox.
func (m *Manager) RenamePath(ctx context.Context, idOrName string, a wire.FileRenameArgs) error {
	c, id, err := m.fileAgent(ctx, idOrName, a.User, map[string]string{"src": a.Src, "dst": a.Dst})
	if err != nil {
		return err
	}
	return m.fileErr(ctx, id, c.RenamePath(ctx, a))
}

// ChmodPath sets a path's mode in the sandbox.
func (m *Manager) ChmodPath(ctx context.Context, idOrName string, a wire.FileChmodArgs) error {
	if err := checkFileMode("mode", &a.Mode); err != nil {
		return err
	}
	c, id, err := m.fileAgent(ctx, idOrName, a.User, map[string]string{"path": a.Path})
	if err != nil {
		return err
	}
	return m.fileErr(ctx, id, c.ChmodPath(ctx, a))
}

// CopyIn is what Manager.CopyIn copies into a sandbox: a tree, or a batch
// of files.
type CopyIn struct {
	// Dest and Tar are a tree: the tar placed at Dest with docker cp's
	// rules (into Dest if it is a directory, else as Dest), as root.
	Dest string
	Tar  io.Reader
	// Files, if set, is a batch instead: each file written at its own
	// path as Files.User, with a result of its own (Dest and Tar unused).
	Files *FileBatch
}

// FileBatch is a batch of files to write; see host.Client.UploadFiles.
type FileBatch struct {
	wire.UploadArgs
	Next   func() (wire.UploadItem, io.Reader, error)
	Result func(wire.FileResult) error
}

// CopyIn copies files into a sandbox: every way of doing so (the API's
// CopyIn and UploadFiles, image builds' COPY) is this call, and the init's
// copy-in op. A batch's path that is invalid fails that file only.
func (m *Manager) CopyIn(ctx context.Context, idOrName string, in CopyIn) error {
	if b := in.Files; b != nil {
		c, id, err := m.fileAgent(ctx, idOrName, b.User, nil)
		if err != nil {
			return err
		}
		return m.fileErr(ctx, id, c.UploadFiles(ctx, b.UploadArgs, b.Next, b.Result))
	}
	if err := ValidateWorkdir("path", in.Dest); err != nil {
		return err
	}
	if in.Dest == "" {
		return fieldErr("path", "destination path is empty")
	}
	c, id, err := m.agentFor(ctx, idOrName)
	if err != nil {
		return err
	}
	if err := c.CopyIn(ctx, in.Dest, in.Tar); err != nil {
		return m.notRunning(ctx, id, fmt.Errorf("copy into sandbox %s:%s: %w", id, in.Dest, err))
	}
	return nil
}

// CopyOut is what Manager.CopyOut copies out of a sandbox: a tree, or a
// batch of files.
type CopyOut struct {
	// Path and Tar are a tree: a tar of Path (its one top-level entry
	// base(Path), symlinks stored as symlinks) written to Tar, as root.
	// The tar comes from the sandbox: extract it with safetar.
	Path string
	Tar  io.Writer
	// Files, if set, is a batch instead: each file read at its own path
	// as Files.User, with a result of its own (Path and Tar unused).
	Files *FileFetch
}

// FileFetch is a batch of files to read; see host.Client.DownloadFiles.
type FileFetch struct {
	wire.DownloadArgs
	host.DownloadHandler
}

// CopyOut copies files out of a sandbox: every way of doing so (the API's
// CopyOut and DownloadFiles, the Docker endpoint's archive GET) is this
// call, and the init's copy-out op. A batch's path that is invalid fails
// that file only.
func (m *Manager) CopyOut(ctx context.Context, idOrName string, out CopyOut) error {
	if b := out.Files; b != nil {
		if len(b.Paths) == 0 {
			return fieldErr("paths", "no paths given")
		}
		if len(b.Paths) > wire.MaxBulkFiles {
			return fieldErr("paths", "%d paths, at most %d in one call", len(b.Paths), wire.MaxBulkFiles)
		}
		c, id, err := m.fileAgent(ctx, idOrName, b.User, nil)
		if err != nil {
			return err
		}
		return m.fileErr(ctx, id, c.DownloadFiles(ctx, b.DownloadArgs, b.DownloadHandler))
	}
	if err := ValidateWorkdir("path", out.Path); err != nil {
		return err
	}
	if out.Path == "" {
		return fieldErr("path", "source path is empty")
	}
	c, id, err := m.agentFor(ctx, idOrName)
	if err != nil {
		return err
	}
	if err := c.CopyOut(ctx, out.Path, out.Tar); err != nil {
		return m.notRunning(ctx, id, fmt.Errorf("copy from sandbox %s:%s: %w", id, out.Path, err))
	}
	return nil
}

// WatchPath streams changes under a path in the sandbox until ctx ends or
// the path goes away.
func (m *Manager) WatchPath(ctx context.Context, idOrName string, a wire.WatchArgs, ready func(), events func([]wire.WatchEvent) error) error {
	c, id, err := m.fileAgent(ctx, idOrName, a.User, map[string]string{"path": a.Path})
	if err != nil {
		return err
	}
	return m.fileErr(ctx, id, c.Watch(ctx, a, ready, events))
}
