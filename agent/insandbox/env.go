package insandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
)

// defaultPath is used when the merged environment has no PATH, matching what
// container runtimes put in images that do not set one.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// mergeEnv appends extra to base; a later K=V replaces an earlier one with the
// same key in place, so the result has one entry per key. Entries without '='
// are dropped: they have no key to merge on and execve would pass them as-is.
func mergeEnv(base, extra []string) []string {
	out := make([]string, 0, len(base)+len(extra))
	idx := make(map[string]int, len(base)+len(extra))
	for _, list := range [][]string{base, extra} {
		for _, kv := range list {
			k, _, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				continue
			}
			if i, dup := idx[k]; dup {
				out[i] = kv
				continue
			}
			idx[k] = len(out)
			out = append(out, kv)
		}
	}
	return out
}

func getenv(env []string, key string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}

var (
	errNotFoundInPath = errors.New("executable file not found in $PATH")
	errNotExecutable  = errors.New("permission denied")
)

// lookPath resolves a command name the way a shell does: names with a slash
// are used as given (relative to the working directory, by execve), others
// are searched in PATH. A match that exists but is not executable makes the
// search fail with errNotExecutable unless a later entry is executable, so
// the caller can tell 126 from 127. Relative PATH entries are ignored: they
// would resolve against whatever directory the command runs in.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path, ok := getenv(env, "PATH")
	if !ok {
		path = defaultPath
	}
	var sawNonExec bool
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, name)
		fi, err := os.Stat(p)
		if err != nil || fi.IsDir() {
			continue
		}
		if !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
			sawNonExec = true
			continue
		}
		return p, nil
	}
	if sawNonExec {
		return "", errNotExecutable
	}
	return "", errNotFoundInPath
}
