// Package safetar writes and extracts the tar streams that carry files in and
// out of sandboxes. Extract is written for hostile input: the tar may come
// from inside an untrusted sandbox and be extracted on the host.
//
// Archives have exactly one top-level entry (like docker cp): a file, a
// symlink, or a directory whose contents all sit under that one name.
//
// Extract guarantees:
//   - nothing is created or written outside destDir: names that are
//     absolute, contain "..", NUL, or exceed MaxNameLen are refused, and every
//     path is resolved relative to a descriptor of destDir without following
//     symlinks (openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS, or an
//     O_NOFOLLOW walk one component at a time where openat2 is unavailable);
//   - with Options.Top, the archive does not choose the name written in
//     destDir: every entry must sit under Top, the name the caller asked
//     for, or the archive is refused;
//   - a top-level directory that does not exist yet is built under a hidden
//     temporary name and renamed into place at the end, so a refused or
//     broken archive leaves nothing; one that exists is extracted into, and
//     on an error what was written before stays;
//   - an existing file or symlink at an entry's name is replaced, never
//     written through; an existing directory keeps its mode and owner; hard
//     links may only point at entries the same archive wrote before;
//   - symlinks whose target leaves the top-level entry (absolute, or ".."
//     climbing above it, or ".." after a name) are refused or skipped, per
//     Options.Links;
//   - regular files get the entry's permission bits without setuid/setgid,
//     directories additionally keep the sticky bit; ownership and directory
//     mtimes are not restored (files belong to the extracting user, or
//     to Options.Owner);
//   - device nodes and FIFOs are refused (or skipped, Options.SkipDevices);
//     sparse entries are refused because they can expand into far more disk
//     than the stream carries.
//
// Write stores regular files, directories and symlinks (as symlinks, never
// followed). Sockets, FIFOs and devices are skipped. Hard links are stored
// as independent copies.
package safetar

import (
	"errors"
	"fmt"
	"strings"
)

// MaxNameLen bounds entry names and symlink targets (PATH_MAX).
const MaxNameLen = 4096

// Options says how Extract names what it writes and what it accepts. The
// zero value is the strict one, for archives from a sandbox; only the
// names are left to the archive.
type Options struct {
	// Top is the top-level name every entry must sit under, the base name
	// of the path that was asked for. Empty accepts the first entry's
	// top-level name (every entry must still share it).
	Top string
	// Rename is the name the top-level entry gets in destDir; empty keeps
	// the archive's (that is, Top).
	Rename string
	// Links says what becomes of symlinks whose target leaves the
	// top-level entry.
	Links LinkPolicy
	// Skipped, if set, is told of each symlink LinksSkipUnsafe skips.
	Skipped func(name, target string)
	// SkipDevices skips device nodes and FIFOs instead of refusing the
	// archive.
	SkipDevices bool
	// Owner, if set, owns every file, directory and symlink this call
	// creates (directories that existed keep theirs): for an extraction
	// by root into a tree whose files belong to another uid block.
	Owner *Owner
}

// Owner is a host uid and gid.
type Owner struct{ UID, GID int }

// LinkPolicy is what Extract does with a symlink whose target leaves the
// top-level entry: an absolute target, or one whose ".." components climb
// above the top-level entry or follow a name.
type LinkPolicy int

const (
	// LinksRefuse fails the extraction, naming the entry.
	LinksRefuse LinkPolicy = iota
	// LinksSkipUnsafe leaves such symlinks out and tells Options.Skipped.
	LinksSkipUnsafe
	// LinksKeep creates every symlink as it is: for archives whose
	// symlinks are no threat to whoever uses the tree, such as the host's
	// files copied into a sandbox.
	LinksKeep
)

// ErrUnsafe marks an entry that Extract refused because it could escape the
// destination or is otherwise not acceptable from an untrusted source.
var ErrUnsafe = errors.New("unsafe tar entry")

// LinkOutsideError is a symlink LinksRefuse refused. It is an ErrUnsafe.
type LinkOutsideError struct {
	Target, Top string
}

func (e *LinkOutsideError) Error() string {
	return fmt.Sprintf("%v: symlink to %q points outside the copied tree %q", ErrUnsafe, e.Target, e.Top)
}

func (e *LinkOutsideError) Unwrap() error { return ErrUnsafe }

func unsafef(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUnsafe, fmt.Sprintf(format, args...))
}

// splitName validates an entry name and returns its components with empty
// and "." components dropped. A name made only of "." and "/" (the archive
// root, as in "./") yields no components and no error.
func splitName(name string) ([]string, error) {
	switch {
	case name == "":
		return nil, unsafef("empty name")
	case len(name) > MaxNameLen:
		return nil, unsafef("name longer than %d bytes", MaxNameLen)
	case strings.IndexByte(name, 0) >= 0:
		return nil, unsafef("name contains NUL")
	case strings.HasPrefix(name, "/"):
		return nil, unsafef("absolute name")
	}
	var comps []string
	for c := range strings.SplitSeq(name, "/") {
		switch c {
		case "", ".":
		case "..":
			return nil, unsafef("name has a .. component")
		default:
			comps = append(comps, c)
		}
	}
	return comps, nil
}

// checkComponent validates a single path component given by the caller
// (Write's name, Extract's rename).
func checkComponent(c string) error {
	if c == "" || c == "." || c == ".." || strings.ContainsAny(c, "/\x00") || len(c) > 255 {
		return fmt.Errorf("safetar: invalid top-level name %q", c)
	}
	return nil
}

// shorten keeps error messages readable when a hostile name is huge.
func shorten(name string) string {
	const keep = 256
	if len(name) <= keep {
		return name
	}
	return name[:keep] + "..."
}
