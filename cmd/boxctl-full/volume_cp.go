package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"connectrpc.com/connect"
	"github.com/urfave/cli/v2"

	"github.com/boxd-dev/boxd/internal/rpcclient"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// volumeCpCommand is `boxctl volume cp`: files in and out of a volume
// without a sandbox, with boxctl cp's rules.
func volumeCpCommand() *cli.Command {
	return &cli.Command{
		Name:      "cp",
		Usage:     "copy files between the host and a volume no sandbox mounts read-write (docker cp rules)",
		ArgsUsage: "SRC DST (one of them VOLUME:/PATH)",
		Description: `boxd writes and reads through the volume's own host mount, never inside a
sandbox; paths in the volume are resolved without following any symlink it
holds. Files copied in belong to the volume's uid block (root in the
sandboxes that mount it). Copying out treats the volume's files as hostile,
as boxctl cp does a sandbox's (see --safe-links).`,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "safe-links", Usage: "copying out: leave out symlinks that point outside the copied tree instead of failing"},
		},
		Action: func(c *cli.Context) error {
			return cpAction(c, "volume cp", "VOLUME:/PATH", splitVolume, volumeCopyIn, volumeCopyOut)
		},
	}
}

// splitVolume reads VOLUME:/PATH (the path absolute, so a host path with
// a colon in it is never taken for a volume's).
func splitVolume(s string) (vol, p string, ok bool) {
	i := strings.Index(s, ":/")
	if i <= 0 || strings.ContainsRune(s[:i], '/') {
		return "", s, false
	}
	return s[:i], s[i+1:], true
}

// volumeCopyIn tars the host path as the calling user and streams it.
func volumeCopyIn(c *cli.Context, local, vol, remote string) error {
	abs, err := filepath.Abs(local)
	if err != nil {
		return fmt.Errorf("volume cp: %w", err)
	}
	if _, err := os.Lstat(abs); err != nil {
		return fmt.Errorf("volume cp: %w", err)
	}
	stream := rpcclient.NewVolumes(c.String("socket")).CopyIntoVolume(c.Context)
	err = sendTar(abs, filepath.Base(abs), func(b []byte, first bool) error {
		msg := &boxdv1.CopyIntoVolumeRequest{Data: b}
		if first {
			msg.Name, msg.Path = vol, remote
		}
		return stream.Send(msg)
	})
	if err != nil && !errors.Is(err, io.EOF) {
		_, _ = stream.CloseAndReceive()
		return fmt.Errorf("volume cp: %w", err)
	}
	if _, err := stream.CloseAndReceive(); err != nil {
		return boxdErr{err}
	}
	return nil
}

// volumeCopyOut extracts the volume's tar on the host under one name, as
// copyOut does a sandbox's.
func volumeCopyOut(c *cli.Context, vol, remote, local string) error {
	if _, err := remoteBase(remote); err != nil {
		return fmt.Errorf("volume cp: %w", err)
	}
	stream, err := rpcclient.NewVolumes(c.String("socket")).CopyFromVolume(c.Context,
		connect.NewRequest(&boxdv1.CopyFromVolumeRequest{Name: vol, Path: remote}))
	if err != nil {
		return boxdErr{err}
	}
	defer stream.Close()
	err = extractMessages(c, readMessages(stream, (*boxdv1.CopyFromVolumeResponse).GetData), remote, local)
	if err != nil {
		if serr := stream.Err(); serr != nil {
			return boxdErr{serr}
		}
		return fmt.Errorf("volume cp: %w", err)
	}
	return nil
}
