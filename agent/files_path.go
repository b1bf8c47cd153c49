package agent

import (
	"fmt"
	"path"
	"strconv"
	"strings"
)

// CheckFilePath reports why p cannot name a file: empty, a NUL byte, longer
// than MaxPathLen, or a component longer than MaxNameLen. The error says
// which path (abbreviated if long) and wraps errInvalid.
func CheckFilePath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("%w: empty path", errInvalid)
	case strings.IndexByte(p, 0) >= 0:
		return fmt.Errorf("%w: path %s contains a NUL byte", errInvalid, QuotePath(p))
	case len(p) > MaxPathLen:
		return fmt.Errorf("%w: path %s is %d bytes, longer than PATH_MAX (%d)", errInvalid, QuotePath(p), len(p), MaxPathLen+1)
	}
	for rest := p; rest != ""; {
		var c string
		c, rest, _ = strings.Cut(rest, "/")
		if len(c) > MaxNameLen {
			return fmt.Errorf("%w: path %s has a %d byte component, longer than NAME_MAX (%d)", errInvalid, QuotePath(p), len(c), MaxNameLen)
		}
	}
	return nil
}

// cleanFilePath turns a path from the host into the absolute, lexically
// clean path the init works on. A relative path is taken from workdir.
// ".." is applied to the text, and ".." at the root stays at the root, as
// the kernel does: the init resolves paths in the sandbox's own root, so
// there is nothing above it to reach.
func cleanFilePath(workdir, p string) (string, error) {
	if err := CheckFilePath(p); err != nil {
		return "", err
	}
	if !path.IsAbs(p) {
		if workdir == "" {
			workdir = "/"
		}
		p = workdir + "/" + p
	}
	c := path.Clean(p)
	if len(c) > MaxPathLen {
		return "", fmt.Errorf("%w: path %s is %d bytes once made absolute, longer than PATH_MAX (%d)", errInvalid, QuotePath(c), len(c), MaxPathLen+1)
	}
	return c, nil
}

// splitFilePath splits a clean absolute path into its directory and final
// component; the root has no final component.
func splitFilePath(p string) (dir, base string) {
	if p == "/" {
		return "/", ""
	}
	i := strings.LastIndexByte(p, '/')
	dir, base = p[:i], p[i+1:]
	if dir == "" {
		dir = "/"
	}
	return dir, base
}

// QuotePath quotes p for a message, abbreviated if long: a hostile 4 KiB
// path should not make every error 4 KiB.
func QuotePath(p string) string {
	const keep = 96
	if len(p) <= keep {
		return strconv.Quote(p)
	}
	return strconv.Quote(p[:keep]) + fmt.Sprintf("... (%d bytes)", len(p))
}
