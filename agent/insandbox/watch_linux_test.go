//go:build linux

package insandbox

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxd-dev/boxd/agent/wire"
)

// inotifyEvent is one event as the kernel lays it out in a read.
func inotifyEvent(wd int32, mask, cookie uint32, name string) []byte {
	nameLen := 0
	if name != "" {
		nameLen = (len(name) + 1 + 15) &^ 15 // NUL-terminated, padded
	}
	b := make([]byte, unix.SizeofInotifyEvent+nameLen)
	binary.NativeEndian.PutUint32(b[0:], uint32(wd))
	binary.NativeEndian.PutUint32(b[4:], mask)
	binary.NativeEndian.PutUint32(b[8:], cookie)
	binary.NativeEndian.PutUint32(b[12:], uint32(nameLen))
	copy(b[unix.SizeofInotifyEvent:], name)
	return b
}

// eventPipe stands in for the inotify descriptor: a pipe is on the same
// poller and takes the same deadlines, and the test decides where one
// read ends and the next begins.
func eventPipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

// floodFirstHalves writes first halves of renames, each with a new
// cookie so none is ever paired: perWrite events a write, pause between
// writes, until the test's cleanup closes the pipe.
func floodFirstHalves(pw *os.File, perWrite int, pause time.Duration) {
	go func() {
		var chunk []byte
		for cookie := uint32(1); ; {
			chunk = chunk[:0]
			for range perWrite {
				chunk = append(chunk, inotifyEvent(1, unix.IN_MOVED_FROM, cookie, "x")...)
				cookie++
			}
			if _, err := pw.Write(chunk); err != nil {
				return
			}
			time.Sleep(pause)
		}
	}()
}

func newTestWatcher() *fsWatcher {
	return &fsWatcher{ifd: -1, root: "/w", recursive: true, rootWD: 1, dirs: map[int32]string{1: "/w", 2: "/w/d"}}
}

// The kernel queues a rename's two halves one after the other, so a read
// can return the first alone (CI saw it: a rename reported as a remove and
// a create). The batch waits for the second half.
func TestWatchPairsARenameSplitAcrossReads(t *testing.T) {
	r, pw := eventPipe(t)
	w := newTestWatcher()
	pw.Write(inotifyEvent(1, unix.IN_MOVED_FROM, 7, "new"))
	go func() {
		time.Sleep(5 * time.Millisecond)
		pw.Write(inotifyEvent(1, unix.IN_MOVED_TO, 7, "renamed"))
	}()
	gone, err := w.readBatch(r, make([]byte, fsWatchReadBuf))
	if err != nil || gone {
		t.Fatalf("readBatch = %v, %v", gone, err)
	}
	want := []wire.WatchEvent{{Path: "/w/renamed", Op: wire.WatchRename, OldPath: "/w/new"}}
	if !reflect.DeepEqual(w.out, want) {
		t.Fatalf("events %+v, want %+v", w.out, want)
	}

	// A directory renamed the same way keeps its watches, under the new
	// path.
	w.out = w.out[:0]
	pw.Write(inotifyEvent(1, unix.IN_MOVED_FROM|unix.IN_ISDIR, 8, "d"))
	go func() {
		time.Sleep(5 * time.Millisecond)
		pw.Write(inotifyEvent(1, unix.IN_MOVED_TO|unix.IN_ISDIR, 8, "e"))
	}()
	if _, err := w.readBatch(r, make([]byte, fsWatchReadBuf)); err != nil {
		t.Fatal(err)
	}
	want = []wire.WatchEvent{{Path: "/w/e", Op: wire.WatchRename, OldPath: "/w/d", IsDir: true}}
	if !reflect.DeepEqual(w.out, want) || w.dirs[2] != "/w/e" {
		t.Fatalf("events %+v, watches %v; want %+v and /w/e watched", w.out, w.dirs, want)
	}
}

// A move out of the watched tree has no second half: after the wait it is
// a remove, a directory's watches are dropped, and the next read is not
// cut short by the wait's deadline.
func TestWatchMoveOutIsARemove(t *testing.T) {
	r, pw := eventPipe(t)
	w := newTestWatcher()
	buf := make([]byte, fsWatchReadBuf)
	pw.Write(inotifyEvent(1, unix.IN_MOVED_FROM|unix.IN_ISDIR, 9, "d"))
	if _, err := w.readBatch(r, buf); err != nil {
		t.Fatal(err)
	}
	want := []wire.WatchEvent{{Path: "/w/d", Op: wire.WatchRemove, IsDir: true}}
	if !reflect.DeepEqual(w.out, want) {
		t.Fatalf("events %+v, want %+v", w.out, want)
	}
	if _, watched := w.dirs[2]; watched {
		t.Fatalf("the moved-out directory is still watched: %v", w.dirs)
	}

	w.out = w.out[:0]
	go func() {
		time.Sleep(2 * fsWatchPairWait)
		pw.Write(inotifyEvent(1, unix.IN_CREATE, 0, "later"))
	}()
	if _, err := w.readBatch(r, buf); err != nil {
		t.Fatalf("the read after a wait: %v", err)
	}
	want = []wire.WatchEvent{{Path: "/w/later", Op: wire.WatchCreate}}
	if !reflect.DeepEqual(w.out, want) {
		t.Fatalf("events %+v, want %+v", w.out, want)
	}
}

// A sandbox that renames without pause cannot hold a batch back: the wait
// has one deadline, however many first halves keep arriving.
func TestWatchPairWaitIsBounded(t *testing.T) {
	r, pw := eventPipe(t)
	w := newTestWatcher()
	floodFirstHalves(pw, 1, time.Millisecond)
	done := make(chan error, 1)
	go func() {
		_, err := w.readBatch(r, make([]byte, fsWatchReadBuf))
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a stream of unpaired renames held the batch for 5 s")
	}
	if len(w.out) == 0 {
		t.Fatal("no events")
	}
}

// Nor can a flood make the batch larger than fsWatchPairEvents (and one
// read): the wait ends there, though its deadline is still ahead.
func TestWatchPairWaitHoldsBoundedEvents(t *testing.T) {
	r, pw := eventPipe(t)
	w := newTestWatcher()
	floodFirstHalves(pw, 2048, 0) // 64 KiB a write
	buf := make([]byte, fsWatchReadBuf)
	if _, err := w.readBatch(r, buf); err != nil {
		t.Fatal(err)
	}
	if fsWatchPairEvents > 1<<16 {
		t.Fatalf("fsWatchPairEvents is %d: a batch could hold that many events", fsWatchPairEvents)
	}
	if most := fsWatchPairEvents + len(buf)/unix.SizeofInotifyEvent; len(w.out) > most {
		t.Fatalf("one batch held %d events; at most %d expected", len(w.out), most)
	}
	if len(w.out) < fsWatchPairEvents {
		t.Logf("the deadline came first: %d events", len(w.out))
	}
}

// The same through the real kernel: thousands of renames, each reported
// as one rename. Before the wait, 3 to 14 in 3,000 came out as a remove
// and a create on this machine.
func TestFileWatchRenamesStayWhole(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		root := filepath.Join(tg.workdir, "watched")
		if err := os.MkdirAll(root, 0o755); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(testCtx(t))
		defer cancel()
		evc, _ := startWatch(ctx, t, tg, wire.WatchArgs{Path: "watched"})
		const n = 2000
		for i := range n {
			f := filepath.Join(root, fmt.Sprint("f", i))
			if err := os.WriteFile(f, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(f, f+".renamed"); err != nil {
				t.Fatal(err)
			}
		}
		renames, split := 0, 0
		timeout := time.After(20 * time.Second)
		for renames+split < n {
			select {
			case ev := <-evc:
				switch ev.Op {
				case wire.WatchRename:
					renames++
				case wire.WatchRemove:
					split++
				}
			case <-timeout:
				t.Fatalf("after %d renames: %d reported as renames, %d as a remove and a create", n, renames, split)
			}
		}
		if split > 0 {
			t.Fatalf("%d of %d renames were reported as a remove and a create", split, n)
		}
	})
}

// startWatch starts a watch and returns once it is in place: its events
// one by one, and how it ended.
func startWatch(ctx context.Context, t *testing.T, tg *target, args wire.WatchArgs) (<-chan wire.WatchEvent, <-chan error) {
	t.Helper()
	ready := make(chan struct{})
	evc := make(chan wire.WatchEvent, 1<<16)
	errc := make(chan error, 1)
	go func() {
		errc <- tg.client.Watch(ctx, args, func() { close(ready) }, func(evs []wire.WatchEvent) error {
			for _, ev := range evs {
				evc <- ev
			}
			return nil
		})
	}()
	select {
	case <-ready:
	case err := <-errc:
		t.Fatal(err)
	}
	return evc, errc
}
