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
//   - an existing file or symlink at an entry's name is replaced, never
//     written through; hard links may only point at names inside the archive;
//   - regular files get the entry's permission bits without setuid/setgid,
//     directories additionally keep the sticky bit; ownership and directory
//     mtimes are not restored (files belong to the extracting user);
//   - device nodes and FIFOs are skipped; sparse entries are refused because
//     they can expand into far more disk than the stream carries.
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

// ErrUnsafe marks an entry that Extract refused because it could escape the
// destination or is otherwise not acceptable from an untrusted source.
var ErrUnsafe = errors.New("unsafe tar entry")

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
