package dockerfile

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"

	"github.com/containerd/errdefs"
)

// MaxContext bounds the build context: it is held in boxd's memory.
const MaxContext = 256 << 20

// entry is one file, directory or symlink of the context.
type entry struct {
	hdr  *tar.Header
	data []byte
}

// Context is the build context the client sent, by clean relative path
// ("." is its root).
type Context struct {
	entries map[string]*entry
}

// ReadContext reads a tar of the build context. Only regular files,
// directories and symlinks are taken; names must stay inside (no
// absolute names, no ".."). Owners are dropped: copied files belong to
// root unless --chown says otherwise.
func ReadContext(r io.Reader) (*Context, error) {
	c := &Context{entries: map[string]*entry{".": {hdr: &tar.Header{Typeflag: tar.TypeDir, Mode: 0o755}}}}
	tr := tar.NewReader(r)
	var total int64
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("context: read tar: %v: %w", err, errdefs.ErrInvalidArgument)
		}
		name := strings.TrimSuffix(hdr.Name, "/")
		if name == "" || path.IsAbs(name) || name != path.Clean(name) || name == ".." || strings.HasPrefix(name, "../") {
			if name == "." {
				continue
			}
			return nil, fmt.Errorf("context: entry %q: not a clean relative name: %w", hdr.Name, errdefs.ErrInvalidArgument)
		}
		e := &entry{hdr: &tar.Header{Typeflag: hdr.Typeflag, Mode: hdr.Mode & 0o7777, ModTime: hdr.ModTime, Linkname: hdr.Linkname}}
		switch hdr.Typeflag {
		case tar.TypeReg:
			total += hdr.Size
			if total > MaxContext {
				return nil, fmt.Errorf("context: larger than %d bytes: %w", MaxContext, errdefs.ErrResourceExhausted)
			}
			b, err := io.ReadAll(io.LimitReader(tr, hdr.Size))
			if err != nil {
				return nil, fmt.Errorf("context: entry %q: %v: %w", hdr.Name, err, errdefs.ErrInvalidArgument)
			}
			e.data = b
			e.hdr.Size = int64(len(b))
		case tar.TypeDir, tar.TypeSymlink:
		case tar.TypeLink:
			// A hard link in the context: the same bytes again.
			t, ok := c.entries[path.Clean(hdr.Linkname)]
			if !ok || t.hdr.Typeflag != tar.TypeReg {
				continue
			}
			e.hdr.Typeflag, e.hdr.Linkname, e.hdr.Size, e.data = tar.TypeReg, "", t.hdr.Size, t.data
		default:
			continue // devices, fifos, hard links: not part of what boxd copies
		}
		c.entries[name] = e
		// Parents a tar leaves out are plain directories.
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
			if _, ok := c.entries[d]; !ok {
				c.entries[d] = &entry{hdr: &tar.Header{Typeflag: tar.TypeDir, Mode: 0o755}}
			}
		}
	}
	return c, nil
}

// errOutside marks a source that leaves the context.
var errOutside = errors.New("outside the build context")

// resolve maps a source path to a context path, following symlinks only
// inside the context; anything that leads out of it is refused.
func (c *Context) resolve(src string, hops int) (string, error) {
	if hops > 40 {
		return "", fmt.Errorf("%s: too many levels of symlinks", src)
	}
	p := src
	if !path.IsAbs(p) {
		p = path.Join("/", p)
		// COPY ../x: a relative source climbing above the context's root.
		if depth(src) < 0 {
			return "", fmt.Errorf("%s: %w", src, errOutside)
		}
	}
	p = strings.TrimPrefix(path.Clean(p), "/")
	if p == "" {
		return ".", nil
	}
	parts := strings.Split(p, "/")
	cur := "."
	for i, part := range parts {
		next := path.Join(cur, part)
		e, ok := c.entries[next]
		if !ok {
			return "", fmt.Errorf("%s: %w", src, errdefs.ErrNotFound)
		}
		if e.hdr.Typeflag == tar.TypeSymlink {
			t, err := linkTarget(next, e.hdr.Linkname)
			if err != nil {
				return "", fmt.Errorf("%s: symlink %s -> %s: %w", src, next, e.hdr.Linkname, err)
			}
			rest := path.Join(append([]string{t}, parts[i+1:]...)...)
			return c.resolve(rest, hops+1)
		}
		cur = next
	}
	return cur, nil
}

// linkTarget is where a symlink at name points, as a context path; an
// absolute target or one climbing above the root is outside the context.
func linkTarget(name, target string) (string, error) {
	if path.IsAbs(target) {
		return "", errOutside
	}
	j := path.Join(path.Dir(name), target)
	if j == ".." || strings.HasPrefix(j, "../") {
		return "", errOutside
	}
	return j, nil
}

// depth is how deep a relative path ends up, counting ".." as up; below 0
// means it climbs out at some point.
func depth(p string) int {
	d := 0
	for _, part := range strings.Split(p, "/") {
		switch part {
		case "", ".":
		case "..":
			d--
			if d < 0 {
				return d
			}
		default:
			d++
		}
	}
	return d
}

// Copy is what a COPY or ADD puts into the image: one tar per top-level
// name to extract into Dir (a copy into a sandbox takes one name at a
// time), and a hash of names, modes and contents (not times) for the step
// cache.
type Copy struct {
	Dir  string
	Tops []string
	Tars [][]byte // Tars[i] holds Tops[i] and what is under it
	Hash string
}

// CopyTar builds the tar for sources copied to dest (docker's rules: a
// directory's contents go into dest; a file goes to dest, or into it when
// dest ends in "/" or there are several sources). Sources may use path.Match
// globs. workdir is the image's working directory for a relative dest.
func (c *Context) CopyTar(srcs []string, dest, workdir string) (*Copy, error) {
	if !path.IsAbs(dest) {
		wd := workdir
		if wd == "" {
			wd = "/"
		}
		slash := strings.HasSuffix(dest, "/") || dest == "." || strings.HasSuffix(dest, "/.")
		dest = path.Join(wd, dest)
		if slash {
			dest += "/"
		}
	}
	intoDir := strings.HasSuffix(dest, "/") || len(srcs) > 1
	var resolved []string
	for _, s := range srcs {
		if depth(s) < 0 && !path.IsAbs(s) {
			return nil, fmt.Errorf("%s: %w", s, errOutside)
		}
		if strings.ContainsAny(s, "*?[") {
			ms, err := c.glob(s)
			if err != nil {
				return nil, err
			}
			if len(ms) > 1 {
				intoDir = true
			}
			resolved = append(resolved, ms...)
			continue
		}
		r, err := c.resolve(s, 0)
		if err != nil {
			return nil, err
		}
		resolved = append(resolved, r)
	}
	out := &Copy{Dir: path.Clean(dest)}
	single := ""
	if !intoDir && len(resolved) == 1 && c.entries[resolved[0]].hdr.Typeflag != tar.TypeDir {
		// COPY file /x: the file is /x.
		out.Dir, single = path.Dir(path.Clean(dest)), path.Base(path.Clean(dest))
	}
	type item struct {
		name string
		e    *entry
	}
	byTop := map[string][]item{}
	addItem := func(name string, e *entry) {
		top := strings.SplitN(name, "/", 2)[0]
		if _, ok := byTop[top]; !ok {
			out.Tops = append(out.Tops, top)
		}
		byTop[top] = append(byTop[top], item{name, e})
	}
	for _, r := range resolved {
		e := c.entries[r]
		if e.hdr.Typeflag != tar.TypeDir {
			name := path.Base(r)
			if single != "" {
				name = single
			}
			addItem(name, e)
			continue
		}
		// A directory: its contents, not itself.
		for _, name := range c.under(r) {
			rel := strings.TrimPrefix(name, r+"/")
			if r == "." {
				rel = name
			}
			ce := c.entries[name]
			if ce.hdr.Typeflag == tar.TypeSymlink {
				if _, err := linkTarget(name, ce.hdr.Linkname); err != nil {
					return nil, fmt.Errorf("symlink %s -> %s: %w", name, ce.hdr.Linkname, err)
				}
			}
			addItem(rel, ce)
		}
	}
	h := sha256.New()
	for _, top := range out.Tops {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for _, it := range byTop[top] {
			hdr := *it.e.hdr
			hdr.Name = it.name
			if hdr.Typeflag == tar.TypeDir {
				hdr.Name += "/"
			}
			fmt.Fprintf(h, "%s\x00%c\x00%o\x00%s\x00%d\x00", hdr.Name, hdr.Typeflag, hdr.Mode, hdr.Linkname, len(it.e.data))
			h.Write(it.e.data)
			if err := tw.WriteHeader(&hdr); err != nil {
				return nil, err
			}
			if _, err := tw.Write(it.e.data); err != nil {
				return nil, err
			}
		}
		if err := tw.Close(); err != nil {
			return nil, err
		}
		out.Tars = append(out.Tars, buf.Bytes())
	}
	out.Hash = hex.EncodeToString(h.Sum(nil))
	return out, nil
}

// under lists the entries below dir, parents before children.
func (c *Context) under(dir string) []string {
	var out []string
	for name := range c.entries {
		if name == "." || name == dir {
			continue
		}
		if dir == "." || strings.HasPrefix(name, dir+"/") {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// glob matches a pattern against the context's entries (no symlinks
// followed in the pattern's directories).
func (c *Context) glob(pat string) ([]string, error) {
	p := strings.TrimPrefix(path.Clean(path.Join("/", pat)), "/")
	var out []string
	for name := range c.entries {
		if ok, err := path.Match(p, name); err != nil {
			return nil, fmt.Errorf("%s: bad pattern: %v", pat, err)
		} else if ok {
			if e := c.entries[name]; e.hdr.Typeflag == tar.TypeSymlink {
				if _, err := linkTarget(name, e.hdr.Linkname); err != nil {
					return nil, fmt.Errorf("symlink %s -> %s: %w", name, e.hdr.Linkname, err)
				}
			}
			out = append(out, name)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no file in the context matches: %w", pat, errdefs.ErrNotFound)
	}
	sort.Strings(out)
	return out, nil
}

// IsOutside reports whether err is a source leaving the context.
func IsOutside(err error) bool { return errors.Is(err, errOutside) }
