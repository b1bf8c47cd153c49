//go:build linux

package insandbox

// The agent file helpers (wire.OpFileReadLines and friends), served by the
// init inside the sandbox with the caller's file-system identity, like
// every file operation. Symlinks: the path a call names resolves as for
// the other file operations (inside the sandbox's own root); below it a
// glob, grep or recursive chown never follows a symlink, so a link in the
// tree cannot take the walk out of it (or round in a loop). An edit
// refuses a final symlink, like chmod: replacing the link with a regular
// file would not be the edit that was asked for.

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/boxd-dev/boxd/agent/wire"
	"github.com/boxd-dev/boxd/internal/safetar"
)

// binarySniff is how much of a file is checked for a NUL byte, as grep does.
const binarySniff = 8 << 10

// grepMatchBytes is the longest line grep matches as a whole; a longer one
// is matched in pieces of this size (a match across a cut is missed).
const grepMatchBytes = 1 << 20

// fdReader reads a file descriptor, retrying EINTR.
type fdReader int

func (r fdReader) Read(p []byte) (int, error) {
	for {
		n, err := unix.Read(int(r), p)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		if n == 0 && len(p) > 0 {
			return 0, io.EOF
		}
		return n, nil
	}
}

// lineReader splits a stream into lines, keeping at most max bytes of
// each: memory stays bounded whatever the line length.
type lineReader struct {
	r   *bufio.Reader
	max int
	buf []byte
}

func newLineReader(r io.Reader, max int) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// next returns the next line without its newline (valid until the next
// call), cut to max bytes, or io.EOF when no line is left. A last line
// without a newline is a line.
func (lr *lineReader) next() (line []byte, cut bool, err error) {
	lr.buf = lr.buf[:0]
	got := false
	for {
		chunk, err := lr.r.ReadSlice('\n')
		if len(chunk) > 0 {
			got = true
		}
		end := err == nil
		if end {
			chunk = chunk[:len(chunk)-1]
		}
		room := lr.max - len(lr.buf)
		if len(chunk) > room {
			cut = true
			chunk = chunk[:max(room, 0)]
		}
		lr.buf = append(lr.buf, chunk...)
		switch {
		case end:
			return lr.buf, cut, nil
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF && got:
			return lr.buf, cut, nil
		default:
			return nil, false, err
		}
	}
}

// lineText makes a line fit for the host: at most max bytes, cut at a
// character boundary, with invalid UTF-8 replaced by U+FFFD.
func lineText(b []byte, max int, cut bool) (string, bool) {
	if len(b) > max {
		b, cut = b[:max], true
		// Drop a character the cut left incomplete.
		if i := lastRuneStart(b); !utf8.FullRune(b[i:]) {
			b = b[:i]
		}
	}
	return strings.ToValidUTF8(string(b), "\uFFFD"), cut
}

// lastRuneStart is the index where the last (possibly partial) character
// of b starts, at most utf8.UTFMax bytes back.
func lastRuneStart(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			return i
		}
	}
	return len(b)
}

// fsIsBinary reports whether the file's first binarySniff bytes hold a NUL.
func fsIsBinary(fd int) bool {
	var buf [binarySniff]byte
	n, _ := fsPreadFull(fd, buf[:], 0)
	return bytes.IndexByte(buf[:n], 0) >= 0
}

func (s *Server) fileReadLines(conn net.Conn, fr *wire.FrameReader, fw *wire.FrameWriter, req *wire.Request) {
	var a wire.ReadLinesArgs
	id, ok := s.fileSetup(fw, req, &a, func() string { return a.User })
	if !ok {
		return
	}
	p, err := cleanFilePath(s.workdir(), a.Path)
	if err == nil {
		err = checkLineArgs(a.Offset, a.Limit, a.MaxLineBytes)
	}
	if err != nil {
		s.replyError(fw, "read-lines", err)
		return
	}
	limit := cmp0(a.Limit, wire.DefaultReadLines)
	maxLine := cmp0(a.MaxLineBytes, wire.DefaultLineBytes)
	fd, fi, err := fsOpenRead(id, p, false)
	if err != nil {
		s.replyError(fw, "read-lines", fsFail("read", p, err))
		return
	}
	defer unix.Close(fd)
	res := wire.ReadLinesResult{Stat: fi, Lines: []wire.Line{}, Binary: fsIsBinary(fd)}
	lr := newLineReader(fdReader(fd), maxLine+utf8.UTFMax)
	budget := wire.ReadLinesBudget
	for n := int64(1); ; n++ {
		line, cut, err := lr.next()
		if err == io.EOF {
			res.EOF = true
			break
		}
		if err != nil {
			s.replyError(fw, "read-lines", fsFail("read", p, err))
			return
		}
		if n <= a.Offset {
			continue
		}
		if len(res.Lines) == limit {
			break
		}
		l := wire.Line{N: n}
		l.T, l.Cut = lineText(line, maxLine, cut)
		b, _ := json.Marshal(l)
		if budget -= len(b) + 1; budget < 0 {
			res.Full = true
			break
		}
		res.Lines = append(res.Lines, l)
	}
	fw.WriteJSON(wire.FrameResult, res)
}

func cmp0(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// checkLineArgs checks read-lines' numbers (the host checks them too,
// naming the field; the init trusts nobody).
func checkLineArgs(offset int64, limit, maxLine int) error {
	switch {
	case offset < 0:
		return fmt.Errorf("%w: offset %d is negative", wire.ErrInvalid, offset)
	case limit < 0 || limit > wire.MaxReadLines:
		return fmt.Errorf("%w: limit %d: between 0 and %d", wire.ErrInvalid, limit, wire.MaxReadLines)
	case maxLine < 0 || maxLine > wire.MaxLineBytes:
		return fmt.Errorf("%w: max_line_bytes %d: between 0 and %d", wire.ErrInvalid, maxLine, wire.MaxLineBytes)
	}
	return nil
}

func (s *Server) fileEdit(conn net.Conn, fr *wire.FrameReader, fw *wire.FrameWriter, req *wire.Request) {
	var a wire.EditArgs
	id, ok := s.fileSetup(fw, req, &a, func() string { return a.User })
	if !ok {
		return
	}
	p, err := cleanFilePath(s.workdir(), a.Path)
	if err == nil && a.Old == "" {
		err = fmt.Errorf("%w: old_string: empty (nothing to replace)", wire.ErrInvalid)
	}
	if err != nil {
		s.replyError(fw, "edit", err)
		return
	}
	var res wire.EditResult
	err = id.do(func() error { return fsEdit(p, &a, &res) })
	if err != nil {
		s.replyError(fw, "edit", fsFail("edit", p, err))
		return
	}
	fw.WriteJSON(wire.FrameResult, res)
}

// fsEdit replaces a.Old in the file at p and writes the result atomically:
// a temporary file in the same directory, given the old file's owner and
// mode, renamed over it. It runs as the caller's identity (id.do).
func fsEdit(p string, a *wire.EditArgs, res *wire.EditResult) error {
	dir, base := splitFilePath(p)
	if base == "" {
		return unix.EISDIR
	}
	dirfd, err := fsOpenDir(dir)
	if err != nil {
		return err
	}
	defer unix.Close(dirfd)
	fd, err := fsOpen(dirfd, base, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY, 0, 0)
	if err == unix.ELOOP && fsIsSymlinkAt(dirfd, base) {
		return fsNotFollowed("edit", p)
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	switch {
	case st.Mode&unix.S_IFMT == unix.S_IFDIR:
		return unix.EISDIR
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return &wire.RemoteError{Message: fmt.Sprintf("edit %s: not a regular file (%s)", wire.QuotePath(p), fsType(st.Mode)), Code: wire.CodeFailedPrecondition}
	case st.Size > wire.MaxEditBytes:
		return &wire.RemoteError{Message: fmt.Sprintf("edit %s: %d bytes; edit rewrites files of at most %d bytes", wire.QuotePath(p), st.Size, wire.MaxEditBytes), Code: wire.CodeResourceExhausted}
	}
	// One byte more than the size: a file that grew meanwhile is noticed.
	data := make([]byte, st.Size+1)
	n, err := fsPreadFull(fd, data, 0)
	if err != nil && err != io.EOF {
		return err
	}
	if int64(n) > st.Size {
		return &wire.RemoteError{Message: fmt.Sprintf("edit %s: the file changed while it was read; nothing changed", wire.QuotePath(p)), Code: wire.CodeFailedPrecondition}
	}
	out, err := editText(p, data[:n], a, res)
	if err != nil {
		return err
	}
	data = nil
	return fsEditWrite(dirfd, p, base, &st, out, res)
}

// editText replaces a.Old in data, refusing text that does not occur, or
// occurs more than once unless a.All says to replace every occurrence.
func editText(p string, data []byte, a *wire.EditArgs, res *wire.EditResult) ([]byte, error) {
	old := []byte(a.Old)
	count := bytes.Count(data, old)
	switch {
	case count == 0:
		return nil, &wire.RemoteError{Message: fmt.Sprintf("edit %s: old_string: the text does not occur in the file; nothing changed", wire.QuotePath(p)), Code: wire.CodeFailedPrecondition}
	case count > 1 && !a.All:
		return nil, &wire.RemoteError{Message: fmt.Sprintf("edit %s: old_string: the text occurs %d times; give more context to make it unique, or replace all; nothing changed", wire.QuotePath(p), count), Code: wire.CodeFailedPrecondition}
	}
	first := bytes.Index(data, old)
	res.Replacements = count
	res.Line = int64(bytes.Count(data[:first], []byte{'\n'})) + 1
	return bytes.ReplaceAll(data, old, []byte(a.New)), nil
}

// fsEditWrite writes an edit's result to a temporary file in the edited
// file's directory, gives it the old file's (st's) owner and mode, and
// renames it over the old file if the name still holds that file.
func fsEditWrite(dirfd int, p, base string, st *unix.Stat_t, out []byte, res *wire.EditResult) error {

	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := ".boxd-edit-" + hex.EncodeToString(rnd[:])
	tfd, err := fsOpen(dirfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW, 0o600, 0)
	if err != nil {
		return safetar.CreateError(dirfd, err)
	}
	committed := false
	defer func() {
		unix.Close(tfd)
		if !committed {
			unix.Unlinkat(dirfd, tmp, 0)
		}
	}()
	if err := fsWriteAll(tfd, out); err != nil {
		return err
	}
	// The old file's owner (before the mode: chown clears setuid and
	// setgid). Only root can give a file away: a user who may write
	// another's file but not own it gets permission denied, not a file
	// that silently changed hands.
	var tst unix.Stat_t
	if err := unix.Fstat(tfd, &tst); err != nil {
		return err
	}
	if tst.Uid != st.Uid || tst.Gid != st.Gid {
		if err := unix.Fchown(tfd, int(st.Uid), int(st.Gid)); err != nil {
			if err == unix.EPERM {
				return &wire.RemoteError{Message: fmt.Sprintf("edit %s: the file belongs to %d:%d, and the edited file would belong to %d:%d (only root may give files away); nothing changed", wire.QuotePath(p), st.Uid, st.Gid, tst.Uid, tst.Gid), Code: wire.CodePermissionDenied}
			}
			return err
		}
	}
	if err := unix.Fchmod(tfd, st.Mode&0o7777); err != nil {
		return err
	}
	// The name must still be the file that was read: a concurrent
	// replacement is not overwritten with an edit of its predecessor.
	var now unix.Stat_t
	if err := unix.Fstatat(dirfd, base, &now, unix.AT_SYMLINK_NOFOLLOW); err != nil || now.Dev != st.Dev || now.Ino != st.Ino {
		return &wire.RemoteError{Message: fmt.Sprintf("edit %s: the file was replaced during the edit; nothing changed", wire.QuotePath(p)), Code: wire.CodeFailedPrecondition}
	}
	if err := unix.Renameat(dirfd, tmp, dirfd, base); err != nil {
		return err
	}
	committed = true
	res.Stat, err = fsStatFD(tfd, p, base)
	return err
}

// watchHangup reports, through the returned flag, when the host closes
// the connection: it sends nothing after its request, so any end of the
// read means it is gone and a long walk can stop.
func watchHangup(conn net.Conn) *atomic.Bool {
	gone := new(atomic.Bool)
	go func() {
		var b [1]byte
		conn.Read(b[:])
		gone.Store(true)
	}()
	return gone
}

// errSearchDone ends a walk early: the result limit or budget was reached
// (the summary says which), or the host went away.
var errSearchDone = errors.New("search done")

// searcher is the state one glob or grep shares across its walk: the
// budget of entries looked at, and the results sent in batches.
type searcher struct {
	gone    *atomic.Bool
	limit   int
	results int
	bytes   int
	batch   jsonBatcher
	sum     wire.SearchSummary
	noLimit bool // a walk that must not stop at the entry budget (chown -R)
}

// visit counts one directory entry against the budget.
func (s *searcher) visit() error {
	if s.gone != nil && s.gone.Load() {
		return errSearchDone
	}
	s.sum.Entries++
	if !s.noLimit && s.sum.Entries > wire.MaxSearchEntries {
		s.stop(fmt.Sprintf("looked at %d directory entries, the most one call may", wire.MaxSearchEntries))
		return errSearchDone
	}
	return nil
}

func (s *searcher) stop(reason string) {
	if !s.sum.Truncated {
		s.sum.Truncated, s.sum.Reason = true, reason
	}
}

// add queues one result, sending a batch when it is large enough.
func (s *searcher) add(v any) error {
	if s.results >= s.limit {
		s.stop(fmt.Sprintf("reached the limit of %d results", s.limit))
		return errSearchDone
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if s.bytes+len(b) > wire.MaxSearchResultBytes {
		s.stop(fmt.Sprintf("the results reached %d bytes, the most one call returns", wire.MaxSearchResultBytes))
		return errSearchDone
	}
	if err := s.batch.addJSON(b); err != nil {
		return err
	}
	s.results++
	s.bytes += len(b) + 1
	return nil
}

// finish sends what is left and the summary.
func (s *searcher) finish() error {
	if err := s.batch.flush(); err != nil {
		return err
	}
	if err := s.batch.fw.WriteJSON(wire.FrameOK, s.sum); err != nil {
		return fmt.Errorf("%w: %v", errFileHostWrite, err)
	}
	return nil
}

// names reads the names in the directory open at dirfd, sorted, counting
// them against the budget: a directory of a million entries stops the
// walk instead of filling the init's memory.
func (s *searcher) names(dirfd int) ([]string, error) {
	dup, err := unix.FcntlInt(uintptr(dirfd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(dup), "dir")
	defer f.Close()
	// A duplicate shares the offset: start from the top, whoever read the
	// directory before.
	if _, err := unix.Seek(dup, 0, io.SeekStart); err != nil {
		return nil, err
	}
	var names []string
	for {
		batch, err := f.Readdirnames(1024)
		names = append(names, batch...)
		if err == io.EOF || (err == nil && len(batch) == 0) {
			break
		}
		if err != nil {
			return nil, fsUnwrapPathError(err)
		}
		if !s.noLimit && s.sum.Entries+len(names) > wire.MaxSearchEntries {
			break // visit stops the walk at the budget
		}
	}
	slices.Sort(names)
	return names, nil
}

// walkTree calls fn for every entry below the directory open at dirfd
// (whose path relative to the walk's root is rel), depth first and sorted
// by name, never following a symlink. fn returns whether to descend into
// a directory. Directories that cannot be read are skipped.
func (s *searcher) walkTree(dirfd int, rel string, depth int, fn func(dirfd int, name, rel string, st *unix.Stat_t) (bool, error)) error {
	names, err := s.names(dirfd)
	if err != nil {
		return nil
	}
	for _, name := range names {
		if err := s.visit(); err != nil {
			return err
		}
		var st unix.Stat_t
		if unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			continue // gone meanwhile, or not ours to see
		}
		r := name
		if rel != "" {
			r = rel + "/" + name
		}
		descend, err := fn(dirfd, name, r, &st)
		if err != nil {
			return err
		}
		if !descend || st.Mode&unix.S_IFMT != unix.S_IFDIR || depth >= wire.MaxListDepth {
			continue
		}
		// O_NOFOLLOW: a directory swapped for a symlink since the fstatat
		// is not entered.
		sub, err := fsOpen(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0, 0)
		if err != nil {
			continue
		}
		err = s.walkTree(sub, r, depth+1, fn)
		unix.Close(sub)
		if err != nil {
			return err
		}
	}
	return nil
}

// searchEnd sends the summary of a walk that ended with err, or the error.
func (s *Server) searchEnd(fw *wire.FrameWriter, sr *searcher, op, p string, err error) {
	if err == nil || errors.Is(err, errSearchDone) {
		if sr.gone.Load() {
			return
		}
		err = sr.finish()
	}
	if err != nil && !errors.Is(err, errFileHostWrite) {
		s.replyError(fw, op, fsFail(op, p, err))
	}
}

func checkSearchLimit(limit int) (int, error) {
	if limit < 0 || limit > wire.MaxSearchResults {
		return 0, fmt.Errorf("%w: limit %d: between 0 and %d", wire.ErrInvalid, limit, wire.MaxSearchResults)
	}
	return cmp0(limit, wire.DefaultSearchResults), nil
}

// splitPattern splits a glob pattern into the directory it starts from
// (its leading segments without metacharacters, taken from base) and the
// segments to match below it. ".." is allowed only in that leading part.
func splitPattern(base, pattern string) (string, []string, error) {
	if strings.HasPrefix(pattern, "/") {
		base = "/"
	}
	var segs []string
	for _, seg := range strings.Split(pattern, "/") {
		if seg != "" && seg != "." {
			segs = append(segs, seg)
		}
	}
	start := base
	i := 0
	for ; i < len(segs)-1 && !wire.HasMeta(segs[i]); i++ {
		start = path.Join(start, segs[i])
	}
	for _, seg := range segs[i:] {
		if seg == ".." {
			return "", nil, fmt.Errorf("%w: pattern: \"..\" after a wildcard", wire.ErrInvalid)
		}
	}
	if len(segs[i:]) == 0 {
		return "", nil, fmt.Errorf("%w: pattern: %q matches nothing below a directory", wire.ErrInvalid, pattern)
	}
	return start, segs[i:], nil
}

func (s *Server) fileGlob(conn net.Conn, fr *wire.FrameReader, fw *wire.FrameWriter, req *wire.Request) {
	var a wire.GlobArgs
	id, ok := s.fileSetup(fw, req, &a, func() string { return a.User })
	if !ok {
		return
	}
	if a.Path == "" {
		a.Path = "."
	}
	p, err := cleanFilePath(s.workdir(), a.Path)
	if err == nil {
		err = wire.CheckGlob("pattern", a.Pattern)
	}
	var start string
	var segs []string
	if err == nil {
		start, segs, err = splitPattern(p, a.Pattern)
	}
	if err == nil {
		start, err = cleanFilePath("/", start)
	}
	sr := &searcher{batch: jsonBatcher{fw: fw}}
	if err == nil {
		sr.limit, err = checkSearchLimit(a.Limit)
	}
	if err != nil {
		s.replyError(fw, "glob", err)
		return
	}
	sr.gone = watchHangup(conn)
	g := &globber{searcher: sr, seen: map[string]bool{}, multi: strings.Count(a.Pattern, "**") > 1}
	err = id.do(func() error {
		fd, err := fsOpen(unix.AT_FDCWD, start, unix.O_RDONLY|unix.O_DIRECTORY, 0, 0)
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			return nil // nothing matches below what is not there
		}
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return g.walk(fd, start, segs, 0)
	})
	s.searchEnd(fw, sr, "glob", start, err)
}

// globber matches a pattern's segments against the tree, reading only the
// directories the pattern can reach.
type globber struct {
	*searcher
	seen  map[string]bool // with more than one "**", a path can match twice
	multi bool
}

func join(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

func (g *globber) emit(st *unix.Stat_t, dirfd int, dir, name string) error {
	p := join(dir, name)
	if g.multi {
		if g.seen[p] {
			return nil
		}
		g.seen[p] = true
	}
	fi := fsStatOf(st, p, name)
	if fi.Type == wire.FileTypeSymlink {
		fi.LinkTarget, _ = fsReadlink(dirfd, name)
	}
	return g.add(fi)
}

func (g *globber) walk(dirfd int, dir string, segs []string, depth int) error {
	seg, rest := segs[0], segs[1:]
	if seg == "**" {
		if len(rest) == 0 {
			// Everything below matches.
			return g.walkTree(dirfd, "", depth, func(dirfd int, name, rel string, st *unix.Stat_t) (bool, error) {
				parent := dir
				if i := strings.LastIndexByte(rel, '/'); i >= 0 {
					parent = join(dir, rel[:i])
				}
				return true, g.emit(st, dirfd, parent, name)
			})
		}
		if err := g.walk(dirfd, dir, rest, depth); err != nil {
			return err
		}
		if depth >= wire.MaxListDepth {
			return nil
		}
		return g.eachDir(dirfd, dir, func(string) bool { return true }, func(sub int, subdir string) error {
			return g.walk(sub, subdir, segs, depth+1)
		})
	}
	if !wire.HasMeta(seg) {
		if err := g.visit(); err != nil {
			return err
		}
		var st unix.Stat_t
		if unix.Fstatat(dirfd, seg, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			return nil
		}
		if len(rest) == 0 {
			return g.emit(&st, dirfd, dir, seg)
		}
		return g.enter(dirfd, dir, seg, &st, rest, depth)
	}
	names, err := g.names(dirfd)
	if err != nil {
		return nil
	}
	for _, name := range names {
		if err := g.visit(); err != nil {
			return err
		}
		if ok, _ := path.Match(seg, name); !ok {
			continue
		}
		var st unix.Stat_t
		if unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			continue
		}
		if len(rest) == 0 {
			if err := g.emit(&st, dirfd, dir, name); err != nil {
				return err
			}
			continue
		}
		if err := g.enter(dirfd, dir, name, &st, rest, depth); err != nil {
			return err
		}
	}
	return nil
}

// enter matches rest below the directory name, never through a symlink.
func (g *globber) enter(dirfd int, dir, name string, st *unix.Stat_t, rest []string, depth int) error {
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || depth >= wire.MaxListDepth {
		return nil
	}
	sub, err := fsOpen(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0, 0)
	if err != nil {
		return nil
	}
	defer unix.Close(sub)
	return g.walk(sub, join(dir, name), rest, depth+1)
}

// eachDir calls fn for each subdirectory (not a symlink to one).
func (g *globber) eachDir(dirfd int, dir string, want func(string) bool, fn func(sub int, subdir string) error) error {
	names, err := g.names(dirfd)
	if err != nil {
		return nil
	}
	for _, name := range names {
		if err := g.visit(); err != nil {
			return err
		}
		var st unix.Stat_t
		if !want(name) || unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			continue
		}
		sub, err := fsOpen(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0, 0)
		if err != nil {
			continue
		}
		err = fn(sub, join(dir, name))
		unix.Close(sub)
		if err != nil {
			return err
		}
	}
	return nil
}

// compileGrep builds the regexp of a grep request.
func compileGrep(a *wire.GrepArgs) (*regexp.Regexp, error) {
	switch {
	case a.Pattern == "":
		return nil, fmt.Errorf("%w: pattern: empty", wire.ErrInvalid)
	case len(a.Pattern) > wire.MaxPatternLen:
		return nil, fmt.Errorf("%w: pattern: %d bytes, at most %d", wire.ErrInvalid, len(a.Pattern), wire.MaxPatternLen)
	}
	expr := a.Pattern
	if a.Literal {
		expr = regexp.QuoteMeta(expr)
	}
	if a.IgnoreCase {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, fmt.Errorf("%w: pattern: %v", wire.ErrInvalid, err)
	}
	return re, nil
}

func (s *Server) fileGrep(conn net.Conn, fr *wire.FrameReader, fw *wire.FrameWriter, req *wire.Request) {
	var a wire.GrepArgs
	id, ok := s.fileSetup(fw, req, &a, func() string { return a.User })
	if !ok {
		return
	}
	if a.Path == "" {
		a.Path = "."
	}
	p, err := cleanFilePath(s.workdir(), a.Path)
	var re *regexp.Regexp
	if err == nil {
		re, err = compileGrep(&a)
	}
	if err == nil && a.Glob != "" {
		err = wire.CheckGlob("glob", a.Glob)
	}
	if err == nil {
		err = checkLineArgs(0, 0, a.MaxLineBytes)
	}
	sr := &searcher{batch: jsonBatcher{fw: fw}}
	if err == nil {
		sr.limit, err = checkSearchLimit(a.Limit)
	}
	if err != nil {
		s.replyError(fw, "grep", err)
		return
	}
	sr.gone = watchHangup(conn)
	g := &grepper{searcher: sr, re: re, maxLine: cmp0(a.MaxLineBytes, wire.DefaultLineBytes)}
	byName := !strings.Contains(a.Glob, "/")
	err = id.do(func() error {
		fd, err := fsOpen(unix.AT_FDCWD, p, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return err
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			return g.file(fd, p)
		case unix.S_IFDIR:
		default:
			return &wire.RemoteError{Message: fmt.Sprintf("grep %s: not a regular file or directory (%s)", wire.QuotePath(p), fsType(st.Mode)), Code: wire.CodeFailedPrecondition}
		}
		return g.walkTree(fd, "", 0, func(dirfd int, name, rel string, st *unix.Stat_t) (bool, error) {
			if st.Mode&unix.S_IFMT != unix.S_IFREG {
				return true, nil
			}
			if a.Glob != "" {
				target := rel
				if byName {
					target = name
				}
				if !wire.MatchGlob(a.Glob, target) {
					return false, nil
				}
			}
			ffd, err := fsOpen(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY, 0, 0)
			if err != nil {
				return false, nil // unreadable (or swapped for a link): skipped
			}
			defer unix.Close(ffd)
			var fst unix.Stat_t
			if unix.Fstat(ffd, &fst) != nil || fst.Mode&unix.S_IFMT != unix.S_IFREG {
				return false, nil
			}
			return false, g.file(ffd, join(p, rel))
		})
	})
	s.searchEnd(fw, sr, "grep", p, err)
}

type grepper struct {
	*searcher
	re      *regexp.Regexp
	maxLine int
	read    int64
}

// file greps one open regular file.
func (g *grepper) file(fd int, p string) error {
	binary := fsIsBinary(fd)
	lr := newLineReader(io.LimitReader(fdReader(fd), wire.MaxGrepBytes-g.read+1), grepMatchBytes)
	for n := int64(1); ; n++ {
		if n&1023 == 0 && g.gone.Load() {
			return errSearchDone
		}
		line, cut, err := lr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil // a read error ends this file only
		}
		g.read += int64(len(line)) + 1
		if g.read > wire.MaxGrepBytes {
			g.stop(fmt.Sprintf("read %d bytes of files, the most one call may", wire.MaxGrepBytes))
			return errSearchDone
		}
		if !g.re.Match(line) {
			continue
		}
		if binary {
			return g.add(wire.GrepMatch{Path: p, Binary: true})
		}
		m := wire.GrepMatch{Path: p, Line: wire.Line{N: n}}
		m.Line.T, m.Line.Cut = lineText(line, g.maxLine, cut)
		if err := g.add(m); err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) fileChown(conn net.Conn, fr *wire.FrameReader, fw *wire.FrameWriter, req *wire.Request) {
	var a wire.ChownArgs
	id, ok := s.fileSetup(fw, req, &a, func() string { return a.User })
	if !ok {
		return
	}
	p, err := cleanFilePath(s.workdir(), a.Path)
	if err != nil {
		s.replyError(fw, "chown", err)
		return
	}
	uid, gid, err := lookupOwner(a.Owner)
	if err != nil {
		s.replyError(fw, "chown", err)
		return
	}
	sr := &searcher{batch: jsonBatcher{fw: fw}, noLimit: true, gone: watchHangup(conn)}
	err = id.do(func() error {
		fd, err := fsOpen(unix.AT_FDCWD, p, unix.O_PATH|unix.O_NOFOLLOW, 0, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return err
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return fsNotFollowed("chown", p)
		}
		if err := unix.Fchownat(fd, "", uid, gid, unix.AT_EMPTY_PATH); err != nil {
			return err
		}
		if !a.Recursive || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return nil
		}
		dfd, err := fsOpen(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY, 0, 0)
		if err != nil {
			return err
		}
		defer unix.Close(dfd)
		return sr.walkTree(dfd, "", 0, func(dirfd int, name, rel string, st *unix.Stat_t) (bool, error) {
			// A symlink inside the tree is changed itself, never its target.
			if err := unix.Fchownat(dirfd, name, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				return false, fmt.Errorf("%s: %w", rel, err)
			}
			return true, nil
		})
	})
	if errors.Is(err, errSearchDone) {
		return // the host left
	}
	if err != nil {
		s.replyError(fw, "chown", fsFail("chown", p, err))
		return
	}
	fw.WriteFrame(wire.FrameOK, nil)
}

// lookupOwner resolves chown's owner spec in the sandbox's own /etc/passwd
// and /etc/group; -1 leaves an id unchanged.
func lookupOwner(spec string) (uid, gid int, err error) {
	if err := wire.CheckOwnerSpec(spec); err != nil {
		return 0, 0, err
	}
	passwd, err := fsReadSmallFile("/etc/passwd", 4<<20)
	if err != nil {
		return 0, 0, fmt.Errorf("owner %q: %w", spec, err)
	}
	group, err := fsReadSmallFile("/etc/group", 4<<20)
	if err != nil {
		return 0, 0, fmt.Errorf("owner %q: %w", spec, err)
	}
	return fsResolveOwner(spec, passwd, group)
}

// fsResolveOwner turns USER, USER:GROUP, USER: or :GROUP (names or ids)
// into ids as chown(1) does; -1 leaves an id unchanged. "USER:" is the
// user's login group.
func fsResolveOwner(spec string, passwd, group []byte) (uid, gid int, err error) {
	user, grp, colon := strings.Cut(spec, ":")
	uid, gid = -1, -1
	loginGID := -1
	if user != "" {
		users := fsParsePasswd(passwd)
		if id, ok := wire.ParseAccountID(user); ok {
			uid = int(id)
			if i := slices.IndexFunc(users, func(e fsPasswdEntry) bool { return e.uid == id }); i >= 0 {
				loginGID = int(users[i].gid)
			}
		} else {
			i := slices.IndexFunc(users, func(e fsPasswdEntry) bool { return e.name == user })
			if i < 0 {
				return 0, 0, fmt.Errorf("%w: owner: no user %q in the sandbox's /etc/passwd", wire.ErrInvalid, user)
			}
			uid, loginGID = int(users[i].uid), int(users[i].gid)
		}
	}
	switch {
	case grp != "":
		if id, ok := wire.ParseAccountID(grp); ok {
			gid = int(id)
		} else {
			groups := fsParseGroup(group)
			i := slices.IndexFunc(groups, func(e fsGroupEntry) bool { return e.name == grp })
			if i < 0 {
				return 0, 0, fmt.Errorf("%w: owner: no group %q in the sandbox's /etc/group", wire.ErrInvalid, grp)
			}
			gid = int(groups[i].gid)
		}
	case colon:
		if loginGID < 0 {
			return 0, 0, fmt.Errorf("%w: owner: %q: user %q has no login group in the sandbox's /etc/passwd", wire.ErrInvalid, spec, user)
		}
		gid = loginGID
	}
	return uid, gid, nil
}
