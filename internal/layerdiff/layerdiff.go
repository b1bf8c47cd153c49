//go:build linux

// Package layerdiff turns an overlayfs writable layer into an OCI layer tar
// and applies such a tar to a new overlay layer. It is what boxd's commit
// and fork are made of.
//
// A sandbox's writable layer (the overlay upperdir) holds files in the
// sandbox's shifted ownership: its root wrote them as host uid HostUID, its
// uid 1000 as HostUID+1000. Image layers, and boxd's fork layers, hold the
// unshifted ids (root is 0) and are shifted at mount time (ID-mapped
// lowers). So the tar is rewritten on its way out with every uid and gid
// mapped back, and a file capability written in the user namespace (a v3
// security.capability naming HostUID as its root) becomes the plain v2 one
// the kernel shows inside the sandbox.
package layerdiff

import (
	"archive/tar"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/containerd/v2/pkg/archive"
	"github.com/containerd/continuity/fs"
	"github.com/containerd/errdefs"
)

// Shift is a user-namespace mapping: ids [0, Size) inside are
// [HostUID, HostUID+Size) and [HostGID, HostGID+Size) on the host. The
// zero Shift maps nothing (a layer that already holds unshifted ids).
type Shift struct {
	HostUID, HostGID, Size uint32
}

// overflowID is what the kernel shows for an id outside a namespace's
// mapping (kernel.overflowuid), so a file the sandbox saw as nobody's stays
// nobody's in the image.
const overflowID = 65534

func (s Shift) uid(host int) int { return unshift(host, s.HostUID, s.Size) }
func (s Shift) gid(host int) int { return unshift(host, s.HostGID, s.Size) }

func unshift(host int, base, size uint32) int {
	if size == 0 {
		return host
	}
	if host >= int(base) && host < int(base)+int(size) {
		return host - int(base)
	}
	return overflowID
}

// CheckOverlay fails when the kernel's overlayfs may write layers that an
// upperdir alone does not describe: with metacopy a copied-up file's data
// stays in the lower layer, with redirect_dir a renamed directory is a
// pointer into it. Both are off by default; containerd never turns them on.
func CheckOverlay() error {
	for _, p := range []string{"metacopy", "redirect_dir"} {
		b, err := os.ReadFile("/sys/module/overlay/parameters/" + p)
		if err != nil {
			continue // overlay built in without the parameter: off
		}
		v := strings.TrimSpace(string(b))
		if v == "Y" || v == "on" || v == "follow" {
			return fmt.Errorf("overlayfs has %s=%s on this host; commit and fork read the writable layer directly and need it off: %w", p, v, errdefs.ErrFailedPrecondition)
		}
	}
	return nil
}

// OverlayDirs returns the upperdir and lowerdirs of a snapshot's mounts. An
// active overlayfs snapshot has both; a view has only lowerdirs; a
// snapshot with no parent is a bind mount of its own directory (returned
// as the upper dir).
func OverlayDirs(mounts []mount.Mount) (upper string, lowers []string, err error) {
	if len(mounts) != 1 {
		return "", nil, fmt.Errorf("%d mounts, want one overlay or bind mount (commit and fork need the overlayfs snapshotter): %w", len(mounts), errdefs.ErrFailedPrecondition)
	}
	m := mounts[0]
	switch m.Type {
	case "bind":
		return m.Source, nil, nil
	case "overlay":
	default:
		return "", nil, fmt.Errorf("a %s mount, want overlay (commit and fork need the overlayfs snapshotter): %w", m.Type, errdefs.ErrFailedPrecondition)
	}
	for _, o := range m.Options {
		if v, ok := strings.CutPrefix(o, "upperdir="); ok {
			upper = v
		} else if v, ok := strings.CutPrefix(o, "lowerdir="); ok {
			lowers = strings.Split(v, ":")
		}
	}
	return upper, lowers, nil
}

// WriteDiff writes to w the OCI layer tar of the changes in the overlay
// upperdir upper over the tree mounted at lowerRoot (the layers under it),
// with ownership unshifted by shift. upper must not change meanwhile (the
// sandbox is frozen): the walk and the reads follow it.
func WriteDiff(ctx context.Context, w io.Writer, lowerRoot, upper string, shift Shift) error {
	if shift == (Shift{}) {
		// Nothing to map (a layer copied out unshifted already): no
		// second pass over the tar.
		cw := archive.NewChangeWriter(w, upper)
		err := fs.DiffDirChanges(ctx, lowerRoot, upper, fs.DiffSourceOverlayFS, cw.HandleChange)
		if err == nil {
			err = cw.Close()
		}
		if err != nil {
			return fmt.Errorf("diff %s: %w", upper, err)
		}
		return nil
	}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := Rewrite(w, pr, shift)
		if err == nil {
			_, err = io.Copy(io.Discard, pr) // anything after the end marker
		}
		pr.CloseWithError(err) // unblocks the writer if the rewrite failed
		done <- err
	}()
	cw := archive.NewChangeWriter(pw, upper)
	err := fs.DiffDirChanges(ctx, lowerRoot, upper, fs.DiffSourceOverlayFS, cw.HandleChange)
	if err == nil {
		err = cw.Close()
	}
	pw.CloseWithError(err)
	rerr := <-done
	if err != nil {
		return fmt.Errorf("diff %s: %w", upper, err)
	}
	if rerr != nil {
		return fmt.Errorf("diff %s: rewrite: %w", upper, rerr)
	}
	return nil
}

// Rewrite copies the tar r to w with every entry's ownership unshifted and
// its file capability made namespace-free.
func Rewrite(w io.Writer, r io.Reader, shift Shift) error {
	tr := tar.NewReader(r)
	tw := tar.NewWriter(w)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		hdr.Uid, hdr.Gid = shift.uid(hdr.Uid), shift.gid(hdr.Gid)
		hdr.Uname, hdr.Gname = "", ""
		hdr.Xattrs = nil //nolint:staticcheck // PAXRecords carries them; both set would write stale values
		if v, ok := hdr.PAXRecords[capKey]; ok {
			if c, keep := unshiftCap([]byte(v), shift); keep {
				hdr.PAXRecords[capKey] = string(c)
			} else {
				delete(hdr.PAXRecords, capKey)
			}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return err
		}
	}
	return tw.Close()
}

const capKey = "SCHILY.xattr.security.capability"

// VFS capability revisions (linux/capability.h).
const (
	capRevMask  = 0xFF000000
	capRev2     = 0x02000000
	capRev3     = 0x03000000
	capV2Size   = 20
	capV3Size   = 24
	capFlagsEff = 0x000001
)

// unshiftCap turns a v3 file capability whose root is the sandbox's root
// (HostUID on the host) into the v2 form the sandbox sees; v2 is kept as
// it is. A v3 capability for another root means nothing in the image: it is
// dropped, as the kernel ignores it inside the sandbox.
func unshiftCap(c []byte, shift Shift) ([]byte, bool) {
	if len(c) < 4 {
		return nil, false
	}
	magic := binary.LittleEndian.Uint32(c)
	switch magic & capRevMask {
	case capRev2:
		return c, len(c) == capV2Size
	case capRev3:
		if len(c) != capV3Size {
			return nil, false
		}
		root := binary.LittleEndian.Uint32(c[20:])
		if shift.Size == 0 {
			return c, true
		}
		if root != shift.HostUID {
			return nil, false
		}
		out := make([]byte, capV2Size)
		copy(out, c[:capV2Size])
		binary.LittleEndian.PutUint32(out, capRev2|magic&capFlagsEff)
		return out, true
	}
	return nil, false
}

// Apply writes the layer tar r into the overlay upperdir upper of a new
// snapshot whose parents' dirs are lowers, as containerd's own overlay
// applier does: whiteouts become overlay whiteouts (0/0 character
// devices, opaque xattrs). The ids in the tar are written as they are.
func Apply(ctx context.Context, upper string, lowers []string, r io.Reader) error {
	opts := []archive.ApplyOpt{archive.WithConvertWhiteout(archive.OverlayConvertWhiteout)}
	if len(lowers) > 0 {
		opts = append(opts, archive.WithParents(lowers))
	}
	if _, err := archive.Apply(ctx, upper, r, opts...); err != nil {
		return fmt.Errorf("apply layer to %s: %w", upper, err)
	}
	return nil
}
