package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"connectrpc.com/connect"
	"github.com/urfave/cli/v2"

	"github.com/boxd-dev/boxd/internal/safetar"
	"github.com/boxd-dev/boxd/rpc/apiwire"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// splitRemote parses "ID:PATH"; a local path containing ':' can be given as
// ./a:b.
func splitRemote(arg string) (id, path string, ok bool) {
	if strings.HasPrefix(arg, "/") || strings.HasPrefix(arg, ".") {
		return "", arg, false
	}
	id, path, ok = strings.Cut(arg, ":")
	if !ok || id == "" {
		return "", arg, false
	}
	return id, path, true
}

func cpCommand() *cli.Command {
	return &cli.Command{
		Name:      "cp",
		Usage:     "copy files or directories between the host and a sandbox (docker cp rules)",
		ArgsUsage: "SRC DST (one of them ID:PATH)",
		Description: `Copying out of a sandbox (ID:PATH DST) writes on the host only under one
name: base(PATH) inside DST if DST is a directory, else DST itself. The tar
comes from inside the sandbox and is treated as hostile: an entry under any
other name, an absolute name or a ".." is refused, as are device nodes and
FIFOs; directories that already exist keep their modes; setuid and setgid
bits are dropped. A symlink whose target leads out of the copied tree (an
absolute target, or ".." climbing above it) fails the copy, unless
--safe-links is given: then it is left out, with a warning on stderr (as
rsync --safe-links). Symlinks within the tree are kept.`,
		Flags: []cli.Flag{
			&cli.BoolFlag{
				Name:  "safe-links",
				Usage: "copying out: leave out symlinks that point outside the copied tree (warning on stderr) instead of failing",
			},
		},
		Action: func(c *cli.Context) error {
			return cpAction(c, "cp", "ID:PATH", splitRemote, copyIn, copyOut)
		},
	}
}

// cpAction runs `boxctl cp` or `volume cp` (name): SRC DST, exactly one
// of them remote (form, as split reads it), copied in or out.
func cpAction(c *cli.Context, name, form string, split func(string) (string, string, bool),
	in func(c *cli.Context, local, target, remote string) error, out func(c *cli.Context, target, remote, local string) error) error {
	if c.NArg() != 2 {
		return fmt.Errorf("usage: boxctl %s SRC DST, with %s on one side", name, form)
	}
	src, dst := c.Args().Get(0), c.Args().Get(1)
	starget, spath, sRemote := split(src)
	dtarget, dpath, dRemote := split(dst)
	switch {
	case sRemote == dRemote:
		return fmt.Errorf("%s: exactly one of %q and %q must be %s", name, src, dst, form)
	case dRemote:
		return in(c, spath, dtarget, dpath)
	default:
		return out(c, starget, spath, dpath)
	}
}

// sendTar sends a tar of the host path local, named name, through send
// in pieces of up to one message; first says the piece is the first.
// io.EOF from send means boxd ended the call (its answer says why).
func sendTar(local, name string, send func(b []byte, first bool) error) error {
	first := true
	// Send marshals before it returns, so BatchWriter's pieces go into
	// messages without a copy.
	mw := &safetar.BatchWriter{Max: apiwire.ChunkBytes, Send: func(b []byte) error {
		f := first
		first = false
		return send(b, f)
	}}
	err := safetar.Write(mw, local, name)
	if err == nil {
		err = mw.Flush()
	}
	if err == nil && first { // an empty stream still has to name its target
		err = send(nil, true)
	}
	return err
}

// extractMessages extracts a copy-out's messages (see extractCopyOut),
// with --safe-links' policy.
func extractMessages(c *cli.Context, r *messageReader, remote, local string) error {
	links := safetar.LinksRefuse
	if c.Bool("safe-links") {
		links = safetar.LinksSkipUnsafe
	}
	err := extractCopyOut(r, remote, local, links, c.App.ErrWriter)
	r.release()
	return err
}

// copyIn tars the host path as the calling user (boxd never opens host
// paths a client names) and streams it to the sandbox.
func copyIn(c *cli.Context, local, id, remote string) error {
	st, err := os.Lstat(local)
	if err != nil {
		return fmt.Errorf("cp: %w", err)
	}
	name := filepath.Base(filepath.Clean(local))
	if st.IsDir() && (name == "." || name == "/") {
		abs, _ := filepath.Abs(local)
		name = filepath.Base(abs)
	}
	stream := apiClient(c).CopyIn(c.Context)
	err = sendTar(local, name, func(b []byte, first bool) error {
		msg := &boxdv1.CopyInRequest{Data: b}
		if first {
			msg.SandboxId, msg.Path = id, remote
		}
		return stream.Send(msg)
	})
	if err != nil && !errors.Is(err, io.EOF) { // io.EOF: boxd ended the call, CloseAndReceive says why
		_, _ = stream.CloseAndReceive()
		return fmt.Errorf("cp: %w", err)
	}
	_, err = stream.CloseAndReceive()
	return err
}

// copyOut extracts a tar from the sandbox on the host. The tar is hostile
// input (sandbox root controls what the init sends): see extractCopyOut.
func copyOut(c *cli.Context, id, remote, local string) error {
	// Checked before the call: a path whose name the host cannot know is
	// refused without asking the sandbox.
	if _, err := remoteBase(remote); err != nil {
		return fmt.Errorf("cp: %w", err)
	}
	stream, err := apiClient(c).CopyOut(c.Context, connect.NewRequest(&boxdv1.CopyOutRequest{SandboxId: id, Path: remote}))
	if err != nil {
		return err
	}
	defer stream.Close()
	err = extractMessages(c, readMessages(stream, (*boxdv1.CopyOutResponse).GetData), remote, local)
	if err != nil {
		if serr := stream.Err(); serr != nil {
			return serr
		}
		if lo := (*safetar.LinkOutsideError)(nil); errors.As(err, &lo) {
			return fmt.Errorf("cp: %w (--safe-links leaves such symlinks out)", err)
		}
		return fmt.Errorf("cp: %w", err)
	}
	return nil
}

// extractCopyOut writes the tar r of the sandbox path remote on the host
// with docker cp rules: as local/base(remote) if local is a directory, else
// as local. The name comes from the request, never from the archive, whose
// entries must all sit under base(remote).
func extractCopyOut(r io.Reader, remote, local string, links safetar.LinkPolicy, warn io.Writer) error {
	top, err := remoteBase(remote)
	if err != nil {
		return err
	}
	dir, as := local, top
	if st, err := os.Stat(local); err != nil || !st.IsDir() {
		dir, as = filepath.Dir(local), filepath.Base(local)
	}
	return safetar.Extract(r, dir, safetar.Options{
		Top:    top,
		Rename: as,
		Links:  links,
		Skipped: func(name, target string) {
			fmt.Fprintf(warn, "boxctl cp: left out symlink %q -> %q: it points outside %q\n", name, target, top)
		},
	})
}

// remoteBase is the name the sandbox's init gives the top-level entry of a
// copy of p: the base name of p cleaned, which for a relative p is the same
// whatever the sandbox's working directory. A path without a final name
// ("/", ".", "..", "a/..") is refused: the name it would resolve to is not
// known on the host.
func remoteBase(p string) (string, error) {
	b := path.Base(path.Clean(p))
	if b == "/" || b == "." || b == ".." {
		return "", fmt.Errorf("%q has no final name to copy out under; name the directory itself (for example /workspace)", p)
	}
	return b, nil
}

// messageReader reads the data of a stream of messages (CopyOut,
// CopyFromVolume) as one stream, handing each message's buffer back to
// the codec's pool once it is read, so the next message reuses memory
// already touched.
type messageReader struct {
	receive func() bool   // the stream's Receive
	data    func() []byte // the received message's data
	err     func() error  // the stream's Err
	cur     []byte
	last    []byte // the data of the last message, to recycle
	done    bool
}

// readMessages reads the data of stream's messages, data(msg) each.
func readMessages[T any](stream *connect.ServerStreamForClient[T], data func(*T) []byte) *messageReader {
	return &messageReader{receive: stream.Receive, data: func() []byte { return data(stream.Msg()) }, err: stream.Err}
}

func (r *messageReader) Read(p []byte) (int, error) {
	for len(r.cur) == 0 {
		r.release()
		if r.done || !r.receive() {
			r.done = true
			if err := r.err(); err != nil {
				return 0, err
			}
			return 0, io.EOF
		}
		r.last = r.data()
		r.cur = r.last
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}

// release recycles the last message's buffer.
func (r *messageReader) release() {
	apiwire.RecycleChunk(r.last)
	r.last, r.cur = nil, nil
}
