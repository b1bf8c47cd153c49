//go:build linux

package insandbox

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxd-dev/boxd/agent/wire"
)

const (
	// fsWatchDirMask is what a watched directory reports about its entries.
	fsWatchDirMask = unix.IN_CREATE | unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_DELETE |
		unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF |
		unix.IN_EXCL_UNLINK
	// fsWatchFileMask is for a watched path that is a single file.
	fsWatchFileMask = unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF
	// fsWatchBatchBytes is roughly how much JSON goes in one event frame.
	fsWatchBatchBytes = 64 << 10
	// fsWatchReadBuf holds what one read of the inotify descriptor returns.
	fsWatchReadBuf = 64 << 10
	// fsWatchPairWait is how long a batch ending in the first half of a
	// rename waits for the second. The kernel queues IN_MOVED_FROM and
	// IN_MOVED_TO one after the other, and a read woken by the first can
	// return before the second is queued; a busy machine makes that
	// common. A rename out of the watched tree has no second half and is
	// reported this much later.
	fsWatchPairWait = 50 * time.Millisecond
	// fsWatchPairEvents ends that wait early once the batch holds this
	// many events: a sandbox flooding the watch while a rename is
	// unpaired cannot make the init hold more than this (a read without
	// the wait gives at most fsWatchReadBuf/16 = 4,096).
	fsWatchPairEvents = 16384
)

// fsWatcher follows one directory (or file), and with recursive every
// directory below it, through one inotify instance. Sandbox code can
// create directories faster than anyone can watch them: new ones are
// scanned once watched, and their entries reported as created, so nothing
// made in between is missed (some creates may be reported twice).
type fsWatcher struct {
	id        *fsIdentity
	ifd       int
	root      string
	recursive bool
	dirs      map[int32]string // watch descriptor -> directory path
	rootWD    int32
	limitHit  bool

	out   []wire.WatchEvent
	moved map[uint32]int // cookie -> index in out of an unpaired IN_MOVED_FROM
}

// add watches dir (not following a final symlink unless it is the root)
// and, when recursive, the directories below it. With report, entries
// found are reported as created: they appeared before the watch could see
// them. Only a failure to watch the root is an error; a subdirectory that
// cannot be watched (removed meanwhile, unreadable) is skipped, as find
// skips it.
func (w *fsWatcher) add(dir string, isRoot, report bool) error {
	mask := uint32(fsWatchDirMask)
	if !isRoot {
		mask |= unix.IN_DONT_FOLLOW | unix.IN_ONLYDIR
		if len(w.dirs) >= wire.MaxWatches {
			w.overflow(dir, fmt.Sprintf("more than %d directories: %s and others are not watched", wire.MaxWatches, dir))
			return nil
		}
	}
	type entry struct {
		name  string
		isDir bool
	}
	var wd int
	var entries []entry
	err := w.id.do(func() error {
		var err error
		wd, err = unix.InotifyAddWatch(w.ifd, dir, mask)
		if err != nil {
			return err
		}
		if !w.recursive && !report {
			return nil
		}
		fd, err := fsOpen(unix.AT_FDCWD, dir, unix.O_RDONLY|unix.O_DIRECTORY, 0, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		names, err := fsReadNames(fd)
		for _, name := range names {
			var st unix.Stat_t
			if unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
				entries = append(entries, entry{name, st.Mode&unix.S_IFMT == unix.S_IFDIR})
			}
		}
		return err
	})
	if err != nil {
		if wd > 0 {
			w.dirs[int32(wd)] = dir
		}
		if isRoot {
			return err
		}
		if err == unix.ENOSPC {
			w.overflow(dir, fmt.Sprintf("out of inotify watches (fs.inotify.max_user_watches): %s and others are not watched", dir))
		}
		return nil
	}
	if prev, dup := w.dirs[int32(wd)]; dup && prev != dir {
		// The same directory under another name (a bind mount of a
		// parent): descending again would never end.
		return nil
	}
	w.dirs[int32(wd)] = dir
	if isRoot {
		w.rootWD = int32(wd)
	}
	for _, e := range entries {
		p := fsJoin(dir, e.name)
		if report {
			w.out = append(w.out, wire.WatchEvent{Path: p, Op: wire.WatchCreate, IsDir: e.isDir})
		}
		if e.isDir && w.recursive {
			w.add(p, false, report)
		}
	}
	return nil
}

// overflow reports, once, that part of the tree is not watched.
func (w *fsWatcher) overflow(dir, msg string) {
	if !w.limitHit {
		w.limitHit = true
		w.out = append(w.out, wire.WatchEvent{Path: dir, Op: wire.WatchOverflow, IsDir: true, Message: msg})
	}
}

func fsJoin(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

// forget drops the watches of dir and every directory below it; with rm
// the kernel is told too (for a tree moved out of sight).
func (w *fsWatcher) forget(dir string, rm bool) {
	for wd, p := range w.dirs {
		if p == dir || strings.HasPrefix(p, dir+"/") {
			if rm {
				unix.InotifyRmWatch(w.ifd, uint32(wd))
			}
			delete(w.dirs, wd)
		}
	}
}

// moveTree renames the paths of the watches under a directory that moved
// within the watched tree.
func (w *fsWatcher) moveTree(from, to string) {
	for wd, p := range w.dirs {
		if p == from {
			w.dirs[wd] = to
		} else if strings.HasPrefix(p, from+"/") {
			w.dirs[wd] = to + p[len(from):]
		}
	}
}

// readBatch reads the next events from the inotify descriptor and
// translates them into w.out. A rename whose second half has not been
// queued yet is waited for, so it is reported as one rename rather than a
// remove and a create. It reports whether the watched root is gone,
// which ends the watch.
func (w *fsWatcher) readBatch(events *os.File, buf []byte) (rootGone bool, err error) {
	n, err := events.Read(buf)
	if err != nil {
		return false, err
	}
	w.moved = map[uint32]int{}
	rootGone = w.handle(buf[:n])
	if !rootGone && len(w.moved) > 0 {
		if rootGone, err = w.awaitPairs(events, buf); err != nil {
			return false, err
		}
	}
	w.settleMoves()
	return rootGone, nil
}

// awaitPairs reads on while a rename in the batch lacks its second half,
// for at most fsWatchPairWait in all and up to fsWatchPairEvents events:
// a sandbox that keeps renaming cannot hold the batch back longer, nor
// make it larger. Then it takes, without waiting,
// whatever is already queued: in a starved process the deadline can win
// over events that did arrive in time.
func (w *fsWatcher) awaitPairs(events *os.File, buf []byte) (rootGone bool, err error) {
	if err := events.SetReadDeadline(time.Now().Add(fsWatchPairWait)); err != nil {
		return false, err
	}
	for !rootGone && len(w.moved) > 0 && len(w.out) < fsWatchPairEvents {
		n, err := events.Read(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			break
		}
		if err != nil {
			return false, err
		}
		rootGone = w.handle(buf[:n])
	}
	if err := events.SetReadDeadline(time.Time{}); err != nil {
		return false, err
	}
	if rootGone || len(w.moved) == 0 || len(w.out) >= fsWatchPairEvents {
		return rootGone, nil
	}
	rc, err := events.SyscallConn()
	if err != nil {
		return false, err
	}
	var n int
	var rerr error
	if err := rc.Read(func(fd uintptr) bool {
		n, rerr = unix.Read(int(fd), buf) // EAGAIN when nothing is queued
		return true
	}); err != nil {
		return false, err
	}
	if rerr == nil && n > 0 {
		rootGone = w.handle(buf[:n])
	}
	return rootGone, nil
}

// handle translates the events of one read, pairing the halves of
// renames through w.moved, which the caller resets once per batch. It
// reports whether the watched root is gone, which ends the watch.
func (w *fsWatcher) handle(buf []byte) (rootGone bool) {
	for len(buf) >= unix.SizeofInotifyEvent {
		wd := int32(binary.NativeEndian.Uint32(buf[0:]))
		mask := binary.NativeEndian.Uint32(buf[4:])
		cookie := binary.NativeEndian.Uint32(buf[8:])
		nameLen := int(binary.NativeEndian.Uint32(buf[12:]))
		if unix.SizeofInotifyEvent+nameLen > len(buf) {
			break
		}
		name := strings.TrimRight(string(buf[unix.SizeofInotifyEvent:unix.SizeofInotifyEvent+nameLen]), "\x00")
		buf = buf[unix.SizeofInotifyEvent+nameLen:]

		if mask&unix.IN_Q_OVERFLOW != 0 {
			w.out = append(w.out, wire.WatchEvent{Path: w.root, Op: wire.WatchOverflow, Message: "the kernel's event queue overflowed; events were lost"})
			continue
		}
		dir, known := w.dirs[wd]
		if !known {
			continue
		}
		isDir := mask&unix.IN_ISDIR != 0
		p := dir
		if name != "" {
			p = fsJoin(dir, name)
		}
		switch {
		case mask&unix.IN_IGNORED != 0:
			delete(w.dirs, wd)
			if wd == w.rootWD {
				return true
			}
		case mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0:
			if wd == w.rootWD {
				msg := "the watched path was removed"
				if mask&unix.IN_MOVE_SELF != 0 {
					msg = "the watched path was moved away"
				}
				w.out = append(w.out, wire.WatchEvent{Path: w.root, Op: wire.WatchRemove, IsDir: isDir || name == "", Message: msg})
				return true
			}
			// A subdirectory: its parent reports the delete or move.
		case mask&unix.IN_CREATE != 0:
			w.emit(wire.WatchEvent{Path: p, Op: wire.WatchCreate, IsDir: isDir})
			if isDir && w.recursive {
				w.add(p, false, true)
			}
		case mask&unix.IN_MODIFY != 0:
			w.emit(wire.WatchEvent{Path: p, Op: wire.WatchWrite, IsDir: isDir})
		case mask&unix.IN_ATTRIB != 0:
			w.emit(wire.WatchEvent{Path: p, Op: wire.WatchChmod, IsDir: isDir})
		case mask&unix.IN_DELETE != 0:
			w.emit(wire.WatchEvent{Path: p, Op: wire.WatchRemove, IsDir: isDir})
		case mask&unix.IN_MOVED_FROM != 0:
			// Provisionally a remove; a matching IN_MOVED_TO makes it a
			// rename.
			w.moved[cookie] = len(w.out)
			w.out = append(w.out, wire.WatchEvent{Path: p, Op: wire.WatchRemove, IsDir: isDir})
		case mask&unix.IN_MOVED_TO != 0:
			if i, ok := w.moved[cookie]; ok {
				delete(w.moved, cookie)
				old := w.out[i].Path
				w.out[i] = wire.WatchEvent{Path: p, Op: wire.WatchRename, OldPath: old, IsDir: isDir}
				if isDir && w.recursive {
					w.moveTree(old, p)
				}
				continue
			}
			w.emit(wire.WatchEvent{Path: p, Op: wire.WatchCreate, IsDir: isDir})
			if isDir && w.recursive {
				w.add(p, false, true)
			}
		}
	}
	return false
}

// settleMoves ends a batch: a first half of a rename still unpaired was
// a move out of the watched tree, and stays reported as a remove. A
// directory's watches would go on reporting under its old paths, so they
// are dropped.
func (w *fsWatcher) settleMoves() {
	for _, i := range w.moved {
		if ev := w.out[i]; ev.IsDir && w.recursive {
			w.forget(ev.Path, true)
		}
	}
	w.moved = nil
}

// emit appends ev unless it repeats the previous event: a large write is
// many IN_MODIFY events, one per write call.
func (w *fsWatcher) emit(ev wire.WatchEvent) {
	if n := len(w.out); n > 0 && w.out[n-1] == ev {
		return
	}
	w.out = append(w.out, ev)
}

// flush sends the pending events in frames of bounded size.
func (w *fsWatcher) flush(fw *wire.FrameWriter) error {
	var buf []byte
	count := 0
	send := func() error {
		if count == 0 {
			return nil
		}
		buf = append(buf, ']')
		count = 0
		return fw.WriteFrame(wire.FrameResult, buf)
	}
	for _, ev := range w.out {
		b, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		if count > 0 && len(buf)+len(b) > fsWatchBatchBytes {
			if err := send(); err != nil {
				return err
			}
		}
		if count == 0 {
			buf = append(buf[:0], '[')
		} else {
			buf = append(buf, ',')
		}
		buf = append(buf, b...)
		count++
	}
	w.out = w.out[:0]
	return send()
}

func (s *Server) fileWatch(conn net.Conn, fr *wire.FrameReader, fw *wire.FrameWriter, req *wire.Request) {
	var a wire.WatchArgs
	id, ok := s.fileSetup(fw, req, &a, func() string { return a.User })
	if !ok {
		return
	}
	p, err := cleanFilePath(s.workdir(), a.Path)
	if err != nil {
		s.replyError(fw, "watch", err)
		return
	}
	ifd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		if err == unix.EMFILE {
			err = &wire.RemoteError{Message: "watch: too many inotify instances (fs.inotify.max_user_instances)", Code: wire.CodeResourceExhausted}
		}
		s.replyError(fw, "watch", fsFail("watch", p, err))
		return
	}
	// On the runtime's poller, so a Read blocks without a thread and
	// Close unblocks it.
	events := os.NewFile(uintptr(ifd), "inotify")
	defer events.Close()
	w := &fsWatcher{id: id, ifd: ifd, root: p, recursive: a.Recursive, dirs: map[int32]string{}}

	var st unix.Stat_t
	err = id.do(func() error { return unix.Stat(p, &st) })
	if err == nil {
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			err = w.add(p, true, false)
		} else {
			w.recursive = false
			err = id.do(func() error {
				wd, err := unix.InotifyAddWatch(ifd, p, fsWatchFileMask)
				if err == nil {
					w.dirs[int32(wd)], w.rootWD = p, int32(wd)
				}
				return err
			})
		}
	}
	if err == nil && w.limitHit {
		err = &wire.RemoteError{Message: fmt.Sprintf("watch %s: %s", wire.QuotePath(p), w.out[0].Message), Code: wire.CodeResourceExhausted}
	}
	if err == unix.ENOSPC {
		err = &wire.RemoteError{Message: fmt.Sprintf("watch %s: out of inotify watches (fs.inotify.max_user_watches)", wire.QuotePath(p)), Code: wire.CodeResourceExhausted}
	}
	if err != nil {
		s.replyError(fw, "watch", fsFail("watch", p, err))
		return
	}
	w.out = w.out[:0]
	if fw.WriteFrame(wire.FrameOK, nil) != nil {
		return
	}

	// The host sends nothing more; its end of the connection closing is
	// the signal to stop.
	go func() {
		io.Copy(io.Discard, conn)
		events.Close()
	}()
	buf := make([]byte, fsWatchReadBuf)
	for {
		gone, err := w.readBatch(events, buf)
		if err != nil {
			if !errors.Is(err, os.ErrClosed) {
				s.replyError(fw, "watch", fsFail("watch", p, err))
			}
			return
		}
		if err := w.flush(fw); err != nil {
			return
		}
		if gone {
			fw.WriteFrame(wire.FrameOK, nil)
			return
		}
	}
}
