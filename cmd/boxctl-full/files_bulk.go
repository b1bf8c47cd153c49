package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"connectrpc.com/connect"
	"github.com/urfave/cli/v2"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// localFile is one host file of an upload and its path in the sandbox.
type localFile struct {
	host, remote string
	mode         uint32
}

// collectUploads lists the regular files under each argument: a file goes
// to DEST/base, a directory's files to DEST/base/relative path. Symlinks
// and special files are skipped with a warning (boxctl cp copies them).
func collectUploads(dest string, args []string) ([]localFile, error) {
	var out []localFile
	for _, arg := range args {
		root := filepath.Clean(arg)
		base := filepath.Base(root)
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				return nil
			}
			if !d.Type().IsRegular() {
				fmt.Fprintf(os.Stderr, "boxctl: skipping %s: not a regular file\n", p)
				return nil
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			out = append(out, localFile{host: p, remote: path.Join(dest, base, filepath.ToSlash(rel)), mode: uint32(fi.Mode().Perm())})
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func filesUploadCommand() *cli.Command {
	return &cli.Command{
		Name:      "upload",
		Usage:     "write many host files into a sandbox directory in one call",
		ArgsUsage: "ID DEST FILE|DIR...",
		Description: `Each FILE goes to DEST/NAME, and the regular files under each DIR to
DEST/DIR-NAME/..., keeping their permission bits. A file that fails is
reported and the others are still written; the exit status is then 1.`,
		Flags: []cli.Flag{
			userFlag,
			&cli.BoolFlag{Name: "parents", Aliases: []string{"p"}, Value: true, Usage: "create missing directories in the sandbox"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() < 3 {
				return fmt.Errorf("usage: boxctl files upload ID DEST FILE|DIR...")
			}
			files, err := collectUploads(c.Args().Get(1), c.Args().Slice()[2:])
			if err != nil {
				return err
			}
			stream := filesClient(c).UploadFiles(c.Context)
			first := &boxdv1.UploadFilesRequest{SandboxId: c.Args().Get(0), User: c.String("user"), Parents: c.Bool("parents")}
			err = stream.Send(first)
			rest := &boxdv1.UploadFilesRequest{}
			for _, f := range files {
				if err != nil {
					break
				}
				var fh *os.File
				if fh, err = os.Open(f.host); err != nil {
					break
				}
				msg := &boxdv1.UploadFilesRequest{File: &boxdv1.UploadFile{Path: f.remote, Mode: &f.mode}}
				sent := false
				err = sendChunks(fh, func(b []byte) error {
					msg.Data, sent = b, true
					err := stream.Send(msg)
					msg = rest
					return err
				})
				fh.Close()
				if err == nil && !sent {
					err = stream.Send(msg)
				}
			}
			if err != nil && !errors.Is(err, io.EOF) {
				stream.CloseAndReceive()
				return err
			}
			resp, err := stream.CloseAndReceive()
			if err != nil {
				return err
			}
			failed := 0
			for _, r := range resp.Msg.Results {
				if r.Error != nil {
					failed++
					fmt.Fprintf(os.Stderr, "%s: %s: %s\n", r.Path, r.Error.Code, r.Error.Message)
				}
			}
			fmt.Printf("%d files, %d bytes written\n", resp.Msg.FilesWritten, resp.Msg.BytesWritten)
			if failed > 0 {
				return fmt.Errorf("%d of %d files failed", failed, len(resp.Msg.Results))
			}
			return nil
		},
	}
}

func filesDownloadCommand() *cli.Command {
	return &cli.Command{
		Name:      "download",
		Usage:     "read many sandbox files into a host directory in one call",
		ArgsUsage: "ID DESTDIR PATH...",
		Description: `Each PATH is written to DESTDIR/NAME on the host, as the calling user,
through a temporary file (an existing file is replaced; a symlink there is
replaced, never followed). A file that fails is reported and the others are
still written; the exit status is then 1.`,
		Flags: []cli.Flag{userFlag},
		Action: func(c *cli.Context) error {
			if c.NArg() < 3 {
				return fmt.Errorf("usage: boxctl files download ID DESTDIR PATH...")
			}
			destDir := c.Args().Get(1)
			paths := c.Args().Slice()[2:]
			stream, err := filesClient(c).DownloadFiles(c.Context, connect.NewRequest(&boxdv1.DownloadFilesRequest{
				SandboxId: c.Args().Get(0), Paths: paths, User: c.String("user"),
			}))
			if err != nil {
				return err
			}
			defer stream.Close()
			var cur *os.File
			abort := func() {
				if cur != nil {
					cur.Close()
					os.Remove(cur.Name())
					cur = nil
				}
			}
			defer abort()
			failed := 0
			for stream.Receive() {
				m := stream.Msg()
				switch ev := m.Event.(type) {
				case *boxdv1.DownloadFilesResponse_Start:
					abort()
					if cur, err = os.CreateTemp(destDir, ".boxctl-download-*"); err != nil {
						return err
					}
					// The sandbox's permission bits, less setuid and the like.
					if err := cur.Chmod(fs.FileMode(ev.Start.Mode & 0o777)); err != nil {
						return err
					}
				case *boxdv1.DownloadFilesResponse_Data:
					if cur == nil {
						return fmt.Errorf("download: data outside a file")
					}
					if _, err := cur.Write(ev.Data); err != nil {
						return err
					}
				case *boxdv1.DownloadFilesResponse_Done:
					if e := ev.Done.Error; e != nil {
						abort()
						failed++
						fmt.Fprintf(os.Stderr, "%s: %s: %s\n", ev.Done.Path, e.Code, e.Message)
						continue
					}
					if cur == nil {
						return fmt.Errorf("download: %s finished without starting", ev.Done.Path)
					}
					if m.Index < 0 || int(m.Index) >= len(paths) {
						return fmt.Errorf("download: file index %d out of range", m.Index)
					}
					name := filepath.Join(destDir, path.Base(paths[m.Index]))
					err := cur.Close()
					if err == nil {
						err = os.Rename(cur.Name(), name)
					}
					if err != nil {
						os.Remove(cur.Name())
						return err
					}
					cur = nil
				}
			}
			if err := stream.Err(); err != nil {
				return err
			}
			if failed > 0 {
				return fmt.Errorf("%d of %d files failed", failed, len(paths))
			}
			return nil
		},
	}
}
