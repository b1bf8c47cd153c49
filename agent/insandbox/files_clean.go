package insandbox

import (
	"fmt"
	"path"
	"strings"

	"github.com/boxd-dev/boxd/agent/wire"
)

// cleanFilePath turns a path from the host into the absolute, lexically
// clean path the init works on. A relative path is taken from workdir.
// ".." is applied to the text, and ".." at the root stays at the root, as
// the kernel does: the init resolves paths in the sandbox's own root, so
// there is nothing above it to reach.
func cleanFilePath(workdir, p string) (string, error) {
	if err := wire.CheckFilePath(p); err != nil {
		return "", err
	}
	if !path.IsAbs(p) {
		if workdir == "" {
			workdir = "/"
		}
		p = workdir + "/" + p
	}
	c := path.Clean(p)
	if len(c) > wire.MaxPathLen {
		return "", fmt.Errorf("%w: path %s is %d bytes once made absolute, longer than PATH_MAX (%d)", wire.ErrInvalid, wire.QuotePath(c), len(c), wire.MaxPathLen+1)
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
