//go:build linux

package layerdiff

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// compare lists the change at crel, if any, between the old stack's entry
// o and the new one's n (nil: absent); fds holds their directory.
func (d *differ) compare(crel, name string, o, n *ent, fds map[int]int) error {
	switch {
	case o == nil && n == nil:
		return nil
	case o == nil:
		return d.emit(Added, crel, name, o, n, fds)
	case n == nil:
		return d.emit(Deleted, crel, name, o, n, fds)
	case o.st.Mode&unix.S_IFMT != n.st.Mode&unix.S_IFMT:
		return d.emit(Modified, crel, name, o, n, fds)
	case n.isDir():
		if o.st.Mode != n.st.Mode || d.uid(o) != d.uid(n) || d.gid(o) != d.gid(n) {
			return d.emit(Modified, crel, name, o, n, fds)
		}
		return nil
	case o.layer == n.layer:
		return nil // the same layer's entry in both
	case d.extra[n.layer] && !d.extra[o.layer]:
		// Copied up over the old layers' file: overlayfs copies a file up
		// only to change it (data, mode, owner, times) or to open it for
		// writing.
		return d.emit(Modified, crel, name, o, n, fds)
	}
	same, err := d.same(name, o, n, fds)
	if err != nil {
		return fmt.Errorf("%q: %w", "/"+crel, err)
	}
	if same {
		return nil
	}
	return d.emit(Modified, crel, name, o, n, fds)
}

func (d *differ) uid(e *ent) int { return d.layers[e.layer].Shift.uid(int(e.st.Uid)) }
func (d *differ) gid(e *ent) int { return d.layers[e.layer].Shift.gid(int(e.st.Gid)) }

// same tells whether two non-directory entries of the same type in
// layers of their own are the same file: mode, owner, size, link target
// or device, and content (read while MaxCompare allows; past it, a file
// counts as changed). Times are not compared: a commit keeps whole
// seconds only.
func (d *differ) same(name string, o, n *ent, fds map[int]int) (bool, error) {
	if o.st.Mode != n.st.Mode || d.uid(o) != d.uid(n) || d.gid(o) != d.gid(n) || o.st.Size != n.st.Size {
		return false, nil
	}
	switch o.st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		a, err := readlinkat(fds[o.layer], name, int(o.st.Size))
		if err != nil {
			return false, fmt.Errorf("readlink: %w", err)
		}
		b, err := readlinkat(fds[n.layer], name, int(n.st.Size))
		if err != nil {
			return false, fmt.Errorf("readlink: %w", err)
		}
		return a == b, nil
	case unix.S_IFREG:
		if d.compared+o.st.Size > d.opts.MaxCompare {
			return false, nil
		}
		d.compared += o.st.Size
		return d.sameContent(fds[o.layer], fds[n.layer], name, &o.st, &n.st)
	case unix.S_IFCHR, unix.S_IFBLK:
		return o.st.Rdev == n.st.Rdev, nil
	}
	return true, nil
}

// sameContent compares two regular files' bytes; a file that changed
// type or went away since the stat counts as different.
func (d *differ) sameContent(ofd, nfd int, name string, ost, nst *unix.Stat_t) (bool, error) {
	a, err := openFile(ofd, name, ost)
	if err != nil {
		return false, nil
	}
	defer a.Close()
	b, err := openFile(nfd, name, nst)
	if err != nil {
		return false, nil
	}
	defer b.Close()
	bufA, bufB := make([]byte, 64<<10), make([]byte, 64<<10)
	for {
		na, ea := io.ReadFull(a, bufA)
		nb, eb := io.ReadFull(b, bufB)
		if !bytes.Equal(bufA[:na], bufB[:nb]) {
			return false, nil
		}
		endA := errors.Is(ea, io.EOF) || errors.Is(ea, io.ErrUnexpectedEOF)
		endB := errors.Is(eb, io.EOF) || errors.Is(eb, io.ErrUnexpectedEOF)
		switch {
		case endA && endB:
			return true, nil
		case endA != endB:
			return false, nil
		case ea != nil:
			return false, fmt.Errorf("read: %w", ea)
		case eb != nil:
			return false, fmt.Errorf("read: %w", eb)
		}
		if err := d.ctx.Err(); err != nil {
			return false, err
		}
	}
}

// openFile opens the regular file name in dirfd, never following a
// symlink and never blocking (a FIFO swapped in), and checks it is the
// file st describes.
func openFile(dirfd int, name string, st *unix.Stat_t) (*fileReader, error) {
	fd, err := openBeneath(dirfd, name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY)
	if err != nil {
		return nil, err
	}
	var now unix.Stat_t
	if err := unix.Fstat(fd, &now); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if now.Mode&unix.S_IFMT != unix.S_IFREG || now.Ino != st.Ino || now.Dev != st.Dev {
		unix.Close(fd)
		return nil, fmt.Errorf("%s changed while it was read", name)
	}
	return &fileReader{fd: fd}, nil
}

type fileReader struct{ fd int }

func (f *fileReader) Read(p []byte) (int, error) {
	n, err := unix.Read(f.fd, p)
	if err != nil {
		return 0, err
	}
	if n == 0 && len(p) > 0 {
		return 0, io.EOF
	}
	return n, nil
}

func (f *fileReader) Close() error { return unix.Close(f.fd) }

// emit adds a change, with its patch when asked for; errStop once the
// listing is full.
func (d *differ) emit(kind ChangeKind, crel, name string, o, n *ent, fds map[int]int) error {
	if d.opts.MaxChanges > 0 && len(d.res.Changes) >= d.opts.MaxChanges {
		return errStop
	}
	e := n
	if kind == Deleted {
		e = o
	}
	c := Change{Path: "/" + crel, Kind: kind, Mode: e.st.Mode, Size: e.st.Size, UID: d.uid(e), GID: d.gid(e)}
	if e.st.Mode&unix.S_IFMT == unix.S_IFLNK {
		t, err := readlinkat(fds[e.layer], name, int(e.st.Size))
		if err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("%q: readlink: %w", "/"+crel, err)
		}
		c.LinkTarget = t
	}
	if d.opts.Patch && e.st.Mode&unix.S_IFMT == unix.S_IFREG {
		d.patch(&c, name, o, n, fds)
	}
	d.res.Changes = append(d.res.Changes, c)
	return nil
}

// patch gives c its unified diff: the old and new regular files' text
// (a side that is absent or not a regular file is empty), within the
// per-file and total limits.
func (d *differ) patch(c *Change, name string, o, n *ent, fds map[int]int) {
	cut := func() {
		c.PatchCut, d.res.PatchTruncated = true, true
	}
	if d.patchBytes >= d.opts.MaxPatch {
		cut()
		return
	}
	var data [2][]byte
	for i, e := range []*ent{o, n} {
		if e == nil || e.st.Mode&unix.S_IFMT != unix.S_IFREG {
			continue
		}
		if e.st.Size > d.opts.MaxFilePatch {
			cut()
			return
		}
		b, err := readSmall(fds[e.layer], name, &e.st, d.opts.MaxFilePatch)
		if err != nil {
			cut() // gone, changed or grown since the stat
			return
		}
		if bytes.IndexByte(b, 0) >= 0 || !utf8.Valid(b) {
			c.Binary = true
			return
		}
		data[i] = b
	}
	oldName, newName := "/dev/null", "/dev/null"
	if o != nil {
		oldName = quotePath("a" + c.Path)
	}
	if n != nil {
		newName = quotePath("b" + c.Path)
	}
	p := unified(oldName, newName, data[0], data[1])
	if int64(len(p)) > d.opts.MaxFilePatch {
		p = p[:bytes.LastIndexByte(p[:d.opts.MaxFilePatch], '\n')+1]
		cut()
	}
	if d.patchBytes+int64(len(p)) > d.opts.MaxPatch {
		cut()
		return
	}
	d.patchBytes += int64(len(p))
	c.Patch = p
}

// readSmall reads a regular file of at most limit bytes.
func readSmall(dirfd int, name string, st *unix.Stat_t, limit int64) ([]byte, error) {
	f, err := openFile(dirfd, name, st)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s grew past %d bytes", name, limit)
	}
	return b, nil
}

// quotePath writes a path as git does in a patch header: as it is, or
// quoted with escapes when it holds a control character, a quote, a
// backslash or bytes that are not UTF-8 (so a name cannot forge a line).
func quotePath(p string) string {
	if !utf8.ValidString(p) {
		return strconv.Quote(p)
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f || r == '"' || r == '\\' {
			return strconv.Quote(p)
		}
	}
	return p
}
