//go:build linux

package layerdiff

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"
)

// Layer is one overlay layer directory (an upperdir, or a committed
// snapshot's directory) and the id mapping its files are written in: the
// zero Shift for image and fork layers, the sandbox's own for its
// writable layer.
type Layer struct {
	Dir   string
	Shift Shift
}

// ChangeKind says how a path differs between two states.
type ChangeKind int

// The kinds of change. A rename is a Deleted and an Added (overlayfs
// records no renames).
const (
	Added ChangeKind = iota + 1
	Modified
	Deleted
)

// Change is one path that differs. The metadata is the path's new state,
// or its old one when it was deleted.
type Change struct {
	Path       string // absolute, in the sandbox; the raw bytes of the names
	Kind       ChangeKind
	Mode       uint32 // st_mode: type and permission bits
	Size       int64
	UID, GID   int // as the sandbox sees them (unshifted)
	LinkTarget string
	// With DiffOptions.Patch: a unified diff of a regular file's text,
	// Binary when either side is not text (a NUL byte or invalid UTF-8),
	// PatchCut when the patch was left out or cut to fit the limits.
	Patch    []byte
	Binary   bool
	PatchCut bool
}

// DiffOptions bound what Changes does.
type DiffOptions struct {
	MaxChanges   int   // changes listed at most; the result is Truncated beyond
	MaxScan      int   // directory entries looked at, at most
	Patch        bool  // unified diffs of regular text files
	MaxFilePatch int64 // a file (either side) and its patch, at most
	MaxPatch     int64 // all patches together, at most
	MaxCompare   int64 // bytes read to tell two same-looking files apart
}

// DiffResult is what Changes found, in path order (a directory before
// what is under it, names sorted bytewise).
type DiffResult struct {
	Changes        []Change
	Truncated      bool // the listing stopped at MaxChanges or MaxScan
	PatchTruncated bool // some patch was left out or cut
	Scanned        int  // directory entries looked at
}

// MaxDiffDepth bounds how deep Changes descends, as MaxCopyDepth bounds a
// copy.
const MaxDiffDepth = MaxCopyDepth

// errStop ends a walk that reached a limit; the result says so.
var errStop = errors.New("limit reached")

// Changes compares two overlay layer stacks, each top first, that share
// their bottom layers (the same directories): the image's layers, say,
// with a sandbox's fork layers and writable layer over them (new) and
// without (old). Only the layers the two do not share are walked, and
// the shared ones are looked at only beside a path those hold, so the
// work follows what changed, not the size of the tree.
//
// A path is Added, Deleted or Modified by what each stack shows there, as
// overlayfs merges it (whiteouts delete, an opaque directory hides what
// is under it). A directory is Modified only when its own type, mode or
// owner changed; what changed under it is listed under it. A deleted
// directory is one change (what was under it is not listed). A file the
// writable layer holds over an older one is Modified (overlayfs copies a
// file up when it is written, chmodded or opened for writing); a file
// both stacks hold in layers of their own (a commit's against the
// writable layer) is compared by type, mode, owner, size, link target,
// and then content.
//
// Every layer is written by sandbox root and may change while it is read:
// nothing is followed (openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS, one
// component at a time), only regular files are opened (O_NONBLOCK, checked
// to be the file stat saw), an entry gone meanwhile is skipped, and the
// listing, the entries looked at and the bytes read are bounded by opts.
func Changes(ctx context.Context, oldStack, newStack []Layer, opts DiffOptions) (DiffResult, error) {
	d := &differ{ctx: ctx, opts: opts}
	defer d.close()
	if err := d.setup(oldStack, newStack); err != nil {
		return DiffResult{}, err
	}
	root := map[int]int{}
	for i, fd := range d.roots {
		root[i] = fd
	}
	err := d.dir("", d.oldIdx, d.newIdx, root, 0)
	if errors.Is(err, errStop) {
		d.res.Truncated, err = true, nil
	}
	d.res.Scanned = d.scanned
	return d.res, err
}

type differ struct {
	ctx            context.Context
	opts           DiffOptions
	layers         []Layer
	extra          []bool // not shared by the two stacks
	roots          []int  // each layer's directory, open
	oldIdx, newIdx []int  // the stacks as indices into layers, top first
	res            DiffResult
	scanned        int
	patchBytes     int64
	compared       int64
}

// setup opens every layer once and marks those the stacks share (their
// common bottom, by directory).
func (d *differ) setup(oldStack, newStack []Layer) error {
	shared := 0
	for shared < len(oldStack) && shared < len(newStack) &&
		oldStack[len(oldStack)-1-shared] == newStack[len(newStack)-1-shared] {
		shared++
	}
	add := func(l Layer, extra bool) (int, error) {
		fd, err := unix.Open(l.Dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return 0, fmt.Errorf("open layer %s: %w", l.Dir, err)
		}
		d.layers, d.extra, d.roots = append(d.layers, l), append(d.extra, extra), append(d.roots, fd)
		return len(d.layers) - 1, nil
	}
	for i, l := range oldStack {
		idx, err := add(l, i < len(oldStack)-shared)
		if err != nil {
			return err
		}
		d.oldIdx = append(d.oldIdx, idx)
	}
	for i, l := range newStack {
		if i >= len(newStack)-shared {
			d.newIdx = append(d.newIdx, d.oldIdx[len(oldStack)-len(newStack)+i])
			continue
		}
		idx, err := add(l, true)
		if err != nil {
			return err
		}
		d.newIdx = append(d.newIdx, idx)
	}
	return nil
}

func (d *differ) close() {
	for _, fd := range d.roots {
		unix.Close(fd)
	}
}

// ent is what one stack shows at a path: the entry of the topmost layer
// holding it and, for a directory, every layer that makes it up (top
// first, down to an opaque one) with that directory open in each.
type ent struct {
	st    unix.Stat_t
	layer int
	dirs  []int
	fds   map[int]int
}

func (e *ent) isDir() bool { return e != nil && e.st.Mode&unix.S_IFMT == unix.S_IFDIR }

func (e *ent) close() {
	if e == nil {
		return
	}
	for _, fd := range e.fds {
		unix.Close(fd)
	}
}

// candidates are the layers whose entries in a directory may differ
// between the stacks: those in one stack's view of it only, and layers
// of one stack's own in either.
func (d *differ) candidates(oldL, newL []int) []int {
	var out []int
	for _, l := range d.union(oldL, newL) {
		if d.extra[l] || slices.Contains(oldL, l) != slices.Contains(newL, l) {
			out = append(out, l)
		}
	}
	return out
}

func (d *differ) union(a, b []int) []int {
	out := slices.Clone(a)
	for _, l := range b {
		if !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	return out
}

// dir compares the directory rel (open in each layer of fds) as the two
// stacks show it, given the layers that make it up in each.
func (d *differ) dir(rel string, oldL, newL []int, fds map[int]int, depth int) error {
	if depth >= MaxDiffDepth {
		return fmt.Errorf("%q: directories nested deeper than %d levels: %w", "/"+rel, MaxDiffDepth, errdefs.ErrFailedPrecondition)
	}
	if err := d.ctx.Err(); err != nil {
		return err
	}
	names, err := d.names(d.candidates(oldL, newL), fds)
	if err != nil {
		return fmt.Errorf("%q: %w", "/"+rel, err)
	}
	for _, name := range names {
		if err := d.entry(rel, name, oldL, newL, fds, depth); err != nil {
			return err
		}
	}
	return nil
}

// names lists the candidate layers' entries of a directory, each name
// once, sorted; a layer whose directory went away meanwhile lists none.
func (d *differ) names(cands []int, fds map[int]int) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, l := range cands {
		err := d.readNames(fds[l], func(n string) {
			if !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		})
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			continue
		}
		if err != nil {
			return nil, err
		}
	}
	slices.Sort(out)
	return out, nil
}

// readNames lists a directory by its descriptor (a dup, so fd stays open
// at its position) in batches, counting each name against MaxScan, so a
// directory of millions of names stops the walk before it fills memory.
func (d *differ) readNames(fd int, add func(string)) error {
	dfd, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(dfd), ".")
	defer f.Close()
	for {
		ns, err := f.Readdirnames(4096)
		for _, n := range ns {
			add(n)
		}
		d.scanned += len(ns)
		if d.opts.MaxScan > 0 && d.scanned > d.opts.MaxScan {
			return errStop
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read directory: %w", err)
		}
	}
}

// entry compares one name of a directory and descends into it when it is
// a directory in the new stack that the layers may show differently.
func (d *differ) entry(rel, name string, oldL, newL []int, fds map[int]int, depth int) error {
	crel := name
	if rel != "" {
		crel = rel + "/" + name
	}
	o, err := d.resolve(fds, oldL, name)
	if err != nil {
		return fmt.Errorf("%q: %w", "/"+crel, err)
	}
	defer o.close()
	n, err := d.resolve(fds, newL, name)
	if err != nil {
		return fmt.Errorf("%q: %w", "/"+crel, err)
	}
	defer n.close()
	if err := d.compare(crel, name, o, n, fds); err != nil {
		return err
	}
	if !n.isDir() {
		return nil
	}
	var coldL []int
	if o.isDir() {
		coldL = o.dirs
	}
	if len(d.candidates(coldL, n.dirs)) == 0 {
		return nil
	}
	cfds := map[int]int{}
	for l, fd := range n.fds {
		cfds[l] = fd
	}
	for _, l := range coldL {
		cfds[l] = o.fds[l]
	}
	return d.dir(crel, coldL, n.dirs, cfds, depth+1)
}

// resolve finds what a stack whose directory is made of layers shows at
// name: nil for nothing (or a whiteout).
func (d *differ) resolve(fds map[int]int, layers []int, name string) (*ent, error) {
	var e *ent
	for _, l := range layers {
		var st unix.Stat_t
		err := unix.Fstatat(fds[l], name, &st, unix.AT_SYMLINK_NOFOLLOW)
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			continue
		}
		if err != nil {
			e.close()
			return nil, fmt.Errorf("stat: %w", err)
		}
		isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
		if e == nil && isWhiteout(&st) {
			return nil, nil
		}
		if e == nil && !isDir {
			return &ent{st: st, layer: l}, nil
		}
		if !isDir {
			return e, nil // a file or a whiteout hides the directories under it
		}
		fd, err := openBeneath(fds[l], name, unix.O_RDONLY|unix.O_DIRECTORY)
		if err != nil {
			// It changed since the stat: what is there now is not a
			// directory this stack shows.
			if e == nil {
				continue
			}
			return e, nil
		}
		if e == nil {
			e = &ent{st: st, layer: l, fds: map[int]int{}}
		}
		e.dirs, e.fds[l] = append(e.dirs, l), fd
		if v, err := getxattr(fd, opaqueXattr); err != nil {
			e.close()
			return nil, err
		} else if string(v) == "y" {
			return e, nil
		}
	}
	return e, nil
}

// isWhiteout: overlayfs marks a deleted name with a 0:0 character device.
func isWhiteout(st *unix.Stat_t) bool {
	return st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == 0
}
