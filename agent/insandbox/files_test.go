//go:build linux

package insandbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/errdefs"

	"github.com/boxd-dev/boxd/agent/host"
	"github.com/boxd-dev/boxd/agent/wire"
)

func u32(v uint32) *uint32 { return &v }

func writeString(t *testing.T, tg *target, a wire.FileWriteArgs, data string) wire.FileWriteResult {
	t.Helper()
	res, err := tg.client.WriteFile(testCtx(t), a, strings.NewReader(data))
	if err != nil {
		t.Fatalf("write %s: %v", a.Path, err)
	}
	return res
}

func readString(t *testing.T, tg *target, a wire.FileReadArgs) (string, wire.FileStat, error) {
	t.Helper()
	s, err := tg.client.ReadFile(testCtx(t), a)
	if err != nil {
		return "", wire.FileStat{}, err
	}
	defer s.Close()
	var buf bytes.Buffer
	_, err = io.Copy(&buf, s)
	return buf.String(), s.Stat, err
}

// openToOthers makes the test's directories reachable for the unprivileged
// users some tests act as (MkdirTemp makes them 0700).
func openToOthers(t *testing.T, tg *target) {
	t.Helper()
	for d := tg.workdir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func requireRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: switches to other users")
	}
}

func TestFileWriteRead(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		ctx := testCtx(t)
		res := writeString(t, tg, wire.FileWriteArgs{Path: "a/b/c.txt", Parents: true, Mode: u32(0o640)}, "hello world")
		want := filepath.Join(tg.workdir, "a/b/c.txt")
		if res.Bytes != 11 || res.Stat.Path != want || res.Stat.Size != 11 || res.Stat.Mode != 0o640 || res.Stat.Type != wire.FileTypeRegular {
			t.Fatalf("write result %+v", res)
		}
		if st, err := os.Stat(want); err != nil || st.Mode().Perm() != 0o640 {
			t.Fatalf("written file: %v %v", st, err)
		}
		got, fi, err := readString(t, tg, wire.FileReadArgs{Path: want})
		if err != nil || got != "hello world" || fi.Size != 11 || fi.Name != "c.txt" {
			t.Fatalf("read: %q %+v %v", got, fi, err)
		}
		// Ranges, including past the end.
		for _, r := range []struct {
			off, n int64
			want   string
		}{{6, 0, "world"}, {0, 5, "hello"}, {6, 100, "world"}, {100, 0, ""}, {4, 3, "o w"}} {
			got, _, err := readString(t, tg, wire.FileReadArgs{Path: "a/b/c.txt", Offset: r.off, Length: r.n})
			if err != nil || got != r.want {
				t.Errorf("read [%d,+%d): %q %v, want %q", r.off, r.n, got, err, r.want)
			}
		}
		// Replacing keeps the mode unless told otherwise.
		writeString(t, tg, wire.FileWriteArgs{Path: "a/b/c.txt"}, "second")
		if st, _ := os.Stat(want); st.Mode().Perm() != 0o640 {
			t.Errorf("replace changed the mode to %v", st.Mode())
		}
		// In place keeps the inode (and hard links); append appends.
		os.Link(want, want+".link")
		writeString(t, tg, wire.FileWriteArgs{Path: "a/b/c.txt", InPlace: true}, "third")
		writeString(t, tg, wire.FileWriteArgs{Path: "a/b/c.txt", Append: true}, "+more")
		if b, _ := os.ReadFile(want + ".link"); string(b) != "third+more" {
			t.Errorf("in place and append through the hard link: %q", b)
		}
		// Exclusive refuses an existing file, atomically or in place.
		for _, inPlace := range []bool{false, true} {
			_, err := tg.client.WriteFile(ctx, wire.FileWriteArgs{Path: "a/b/c.txt", Exclusive: true, InPlace: inPlace}, strings.NewReader("x"))
			if !errdefs.IsAlreadyExists(err) {
				t.Errorf("exclusive (in place %v) over an existing file: %v", inPlace, err)
			}
		}
		writeString(t, tg, wire.FileWriteArgs{Path: "new.txt", Exclusive: true}, "")
		// Default mode of a new file; an empty file.
		if st, err := os.Stat(filepath.Join(tg.workdir, "new.txt")); err != nil || st.Mode().Perm() != 0o644 || st.Size() != 0 {
			t.Errorf("new empty file: %v %v", st, err)
		}
		// Without parents a missing directory is not found.
		if _, err := tg.client.WriteFile(ctx, wire.FileWriteArgs{Path: "x/y/z"}, strings.NewReader("x")); !errdefs.IsNotFound(err) {
			t.Errorf("write without parents: %v", err)
		}
		// Directories and special files are refused.
		if _, err := tg.client.WriteFile(ctx, wire.FileWriteArgs{Path: "a"}, strings.NewReader("x")); !errdefs.IsFailedPrecondition(err) {
			t.Errorf("write over a directory: %v", err)
		}
		if _, _, err := readString(t, tg, wire.FileReadArgs{Path: "a"}); !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "is a directory") {
			t.Errorf("read of a directory: %v", err)
		}
		fifo := filepath.Join(tg.workdir, "fifo")
		syscall.Mkfifo(fifo, 0o644)
		if _, _, err := readString(t, tg, wire.FileReadArgs{Path: fifo}); !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("read of a fifo: %v", err)
		}
		if _, err := tg.client.WriteFile(ctx, wire.FileWriteArgs{Path: fifo, InPlace: true}, strings.NewReader("x")); err == nil {
			t.Errorf("in-place write to a fifo succeeded")
		}
		if _, _, err := readString(t, tg, wire.FileReadArgs{Path: "missing"}); !errdefs.IsNotFound(err) {
			t.Errorf("read of a missing file: %v", err)
		}
		if _, _, err := readString(t, tg, wire.FileReadArgs{Path: "new.txt", Offset: -1}); !errdefs.IsInvalidArgument(err) {
			t.Errorf("negative offset: %v", err)
		}
		if _, err := tg.client.WriteFile(ctx, wire.FileWriteArgs{Path: "m", Mode: u32(0o10000)}, strings.NewReader("x")); !errdefs.IsInvalidArgument(err) {
			t.Errorf("mode beyond 07777: %v", err)
		}
		assertNoTempFiles(t, tg.workdir)
	})
}

func assertNoTempFiles(t *testing.T, root string) {
	t.Helper()
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err == nil && strings.HasPrefix(fi.Name(), ".boxd-tmp-") {
			t.Errorf("temporary file left behind: %s", p)
		}
		return nil
	})
}

// failingReader yields n bytes, then fails.
type failingReader struct{ n int }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, errors.New("source broke")
	}
	m := min(len(p), r.n)
	r.n -= m
	return m, nil
}

// TestFileWriteAtomic: readers racing a stream of replacements see one
// whole version or another, never a mix or a truncated file; a write whose
// source fails leaves the old file.
func TestFileWriteAtomic(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		ctx := testCtx(t)
		p := filepath.Join(tg.workdir, "atomic.bin")
		versions := make([][]byte, 4)
		for i := range versions {
			versions[i] = bytes.Repeat([]byte{byte('a' + i)}, 3*wire.FileChunk+1234)
		}
		if _, err := tg.client.WriteFile(ctx, wire.FileWriteArgs{Path: p}, bytes.NewReader(versions[0])); err != nil {
			t.Fatal(err)
		}
		var stop atomic.Bool
		var bad atomic.Value
		var reads atomic.Int64
		var wg sync.WaitGroup
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					b, err := os.ReadFile(p)
					if err != nil {
						bad.Store(err.Error())
						return
					}
					reads.Add(1)
					if len(b) != len(versions[0]) || bytes.Count(b, b[:1]) != len(b) {
						bad.Store(fmt.Sprintf("reader saw %d bytes starting %q", len(b), b[:min(len(b), 4)]))
						return
					}
				}
			}()
		}
		for i := range 40 {
			if _, err := tg.client.WriteFile(ctx, wire.FileWriteArgs{Path: p}, bytes.NewReader(versions[i%len(versions)])); err != nil {
				t.Fatal(err)
			}
		}
		stop.Store(true)
		wg.Wait()
		if v := bad.Load(); v != nil {
			t.Fatal(v)
		}
		t.Logf("%d concurrent reads", reads.Load())

		before, _ := os.ReadFile(p)
		_, err := tg.client.WriteFile(ctx, wire.FileWriteArgs{Path: p}, &failingReader{n: 2*wire.FileChunk + 5})
		if err == nil || !strings.Contains(err.Error(), "source broke") {
			t.Fatalf("write from a failing source: %v", err)
		}
		// The init notices the closed connection a moment later.
		deadline := time.Now().Add(5 * time.Second)
		for {
			after, _ := os.ReadFile(p)
			if !bytes.Equal(after, before) {
				t.Fatalf("a failed write changed the file")
			}
			ents, _ := os.ReadDir(tg.workdir)
			if len(ents) == 1 || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		assertNoTempFiles(t, tg.workdir)
	})
}

// TestFileSymlinks checks which operations follow a final symlink.
func TestFileSymlinks(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		ctx := testCtx(t)
		secret := filepath.Join(tg.workdir, "secret")
		os.WriteFile(secret, []byte("secret"), 0o600)
		link := filepath.Join(tg.workdir, "link")
		os.Symlink(secret, link)

		// Read follows, unless told not to.
		if got, _, err := readString(t, tg, wire.FileReadArgs{Path: link}); err != nil || got != "secret" {
			t.Errorf("read through link: %q %v", got, err)
		}
		if _, _, err := readString(t, tg, wire.FileReadArgs{Path: link, NoFollow: true}); !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "symbolic link") {
			t.Errorf("read no-follow of a link: %v", err)
		}
		// Stat describes the link unless asked to follow.
		fi, err := tg.client.StatFile(ctx, wire.FileStatArgs{Path: link})
		if err != nil || fi.Type != wire.FileTypeSymlink || fi.LinkTarget != secret {
			t.Errorf("stat link: %+v %v", fi, err)
		}
		fi, err = tg.client.StatFile(ctx, wire.FileStatArgs{Path: link, Follow: true})
		if err != nil || fi.Type != wire.FileTypeRegular || fi.Size != 6 {
			t.Errorf("stat follow: %+v %v", fi, err)
		}
		// Chmod and in-place writes refuse it.
		if err := tg.client.ChmodPath(ctx, wire.FileChmodArgs{Path: link, Mode: 0o666}); !errdefs.IsFailedPrecondition(err) {
			t.Errorf("chmod of a link: %v", err)
		}
		if _, err := tg.client.WriteFile(ctx, wire.FileWriteArgs{Path: link, InPlace: true}, strings.NewReader("pwned")); !errdefs.IsFailedPrecondition(err) {
			t.Errorf("in-place write through a link: %v", err)
		}
		// An atomic write replaces the link itself.
		writeString(t, tg, wire.FileWriteArgs{Path: link}, "new")
		if l, err := os.Lstat(link); err != nil || l.Mode()&os.ModeSymlink != 0 {
			t.Errorf("link after write: %v %v", l, err)
		}
		// Remove removes a link, not its target; rename renames it.
		os.Symlink(secret, link+"2")
		if err := tg.client.RenamePath(ctx, wire.FileRenameArgs{Src: link + "2", Dst: link + "3"}); err != nil {
			t.Fatal(err)
		}
		if err := tg.client.RemovePath(ctx, wire.FileRemoveArgs{Path: link + "3"}); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(secret)
		st, _ := os.Stat(secret)
		if string(b) != "secret" || st.Mode().Perm() != 0o600 {
			t.Errorf("symlink target changed: %q %v", b, st.Mode())
		}
		// A directory symlinked in the middle of a path is followed.
		os.Mkdir(filepath.Join(tg.workdir, "real"), 0o755)
		os.Symlink("real", filepath.Join(tg.workdir, "dirlink"))
		writeString(t, tg, wire.FileWriteArgs{Path: "dirlink/f"}, "via link")
		if b, _ := os.ReadFile(filepath.Join(tg.workdir, "real/f")); string(b) != "via link" {
			t.Errorf("write through a directory link: %q", b)
		}
	})
}

// TestFileSymlinkSwap races writes and chmods against a loop that keeps
// swapping the target between a file and a symlink to a protected file:
// the protected file must never change.
func TestFileSymlinkSwap(t *testing.T) {
	tg := startServer(t)
	ctx := testCtx(t)
	protected := filepath.Join(tg.workdir, "protected")
	os.WriteFile(protected, []byte("original"), 0o600)
	victim := filepath.Join(tg.workdir, "victim")
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		tmpLink := victim + ".l"
		for !stop.Load() {
			os.Remove(tmpLink)
			os.Symlink(protected, tmpLink)
			os.Rename(tmpLink, victim)
			os.WriteFile(tmpLink, []byte("plain"), 0o644)
			os.Rename(tmpLink, victim)
		}
	}()
	for i := range 300 {
		switch i % 3 {
		case 0:
			tg.client.WriteFile(ctx, wire.FileWriteArgs{Path: victim}, strings.NewReader("pwned"))
		case 1:
			tg.client.WriteFile(ctx, wire.FileWriteArgs{Path: victim, InPlace: true}, strings.NewReader("pwned"))
		case 2:
			tg.client.ChmodPath(ctx, wire.FileChmodArgs{Path: victim, Mode: 0o666})
		}
	}
	stop.Store(true)
	<-done
	b, _ := os.ReadFile(protected)
	st, _ := os.Stat(protected)
	if string(b) != "original" || st.Mode().Perm() != 0o600 {
		t.Fatalf("protected file changed through a swapped symlink: %q %v", b, st.Mode())
	}
}

func TestFileHostilePaths(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		ctx := testCtx(t)
		long := strings.Repeat("a/", 2100)
		for name, p := range map[string]string{
			"empty":          "",
			"nul":            "a\x00b",
			"overlong":       long,
			"long component": strings.Repeat("x", 256),
		} {
			_, err := tg.client.StatFile(ctx, wire.FileStatArgs{Path: p})
			if !errdefs.IsInvalidArgument(err) {
				t.Errorf("%s: stat: %v, want invalid argument", name, err)
				continue
			}
			if len(err.Error()) > 300 {
				t.Errorf("%s: error of %d bytes: %.100s...", name, len(err.Error()), err)
			}
			if p != "" && !strings.Contains(err.Error(), "path") {
				t.Errorf("%s: error does not name the path: %v", name, err)
			}
			if _, err := tg.client.WriteFile(ctx, wire.FileWriteArgs{Path: p}, strings.NewReader("x")); !errdefs.IsInvalidArgument(err) {
				t.Errorf("%s: write: %v", name, err)
			}
		}
		// A loop of symlinks is a clear error, not a hang.
		os.Symlink("loop2", filepath.Join(tg.workdir, "loop1"))
		os.Symlink("loop1", filepath.Join(tg.workdir, "loop2"))
		for _, p := range []string{"loop1", "loop1/x"} {
			_, _, err := readString(t, tg, wire.FileReadArgs{Path: p})
			if !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), "symlink loop") {
				t.Errorf("read %s: %v", p, err)
			}
		}
		if _, err := tg.client.WriteFile(ctx, wire.FileWriteArgs{Path: "loop1/x"}, strings.NewReader("x")); !errdefs.IsInvalidArgument(err) {
			t.Errorf("write under a loop: %v", err)
		}
		// ".." is applied to the text and stops at the root.
		writeString(t, tg, wire.FileWriteArgs{Path: "dots"}, "dots")
		up := strings.Repeat("../", 40) + strings.TrimPrefix(tg.workdir, "/") + "/dots"
		for _, p := range []string{"sub/../dots", "../" + filepath.Base(tg.workdir) + "/dots", up, "/" + up} {
			if got, _, err := readString(t, tg, wire.FileReadArgs{Path: p}); err != nil || got != "dots" {
				t.Errorf("read %q: %q %v", p, got, err)
			}
		}
		// Root cannot be removed or renamed.
		if err := tg.client.RemovePath(ctx, wire.FileRemoveArgs{Path: "/", Recursive: true}); !errdefs.IsInvalidArgument(err) {
			t.Errorf("remove /: %v", err)
		}
		if err := tg.client.RemovePath(ctx, wire.FileRemoveArgs{Path: strings.Repeat("../", 50), Recursive: true}); !errdefs.IsInvalidArgument(err) {
			t.Errorf("remove ../../..: %v", err)
		}
		// Unknown arguments are refused, not ignored.
		f := rawExchange(t, tg, encodeFrame(wire.FrameRequest, []byte(`{"op":"`+wire.OpFileRead+`","args":{"path":"dots","no_such_option":true}}`)))
		if err := wire.DecodeRemoteError(f.Payload); f.Type != wire.FrameError || !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), "no_such_option") {
			t.Errorf("unknown argument: %s frame, %v", f.Type, err)
		}
	})
}

func listAll(t *testing.T, tg *target, a wire.FileListArgs) ([]wire.FileStat, error) {
	var all []wire.FileStat
	err := tg.client.ListDir(testCtx(t), a, func(b []wire.FileStat) error {
		all = append(all, b...)
		return nil
	})
	return all, err
}

func TestFileList(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		w := tg.workdir
		os.MkdirAll(filepath.Join(w, "d/e/f"), 0o755)
		os.WriteFile(filepath.Join(w, "d/e/f/deep"), []byte("deep"), 0o644)
		os.WriteFile(filepath.Join(w, "d/file"), []byte("12345"), 0o600)
		os.WriteFile(filepath.Join(w, "b"), nil, 0o644)
		os.Symlink("d", filepath.Join(w, "c-link"))
		names := func(es []wire.FileStat) string {
			var s []string
			for _, e := range es {
				s = append(s, e.Path)
			}
			return strings.Join(s, " ")
		}
		es, err := listAll(t, tg, wire.FileListArgs{Path: "."})
		if err != nil || names(es) != "b c-link d" {
			t.Fatalf("depth 1: %q %v", names(es), err)
		}
		if es[1].Type != wire.FileTypeSymlink || es[1].LinkTarget != "d" || es[2].Type != wire.FileTypeDir {
			t.Errorf("entries: %+v", es)
		}
		es, _ = listAll(t, tg, wire.FileListArgs{Path: w, Depth: 2})
		if names(es) != "b c-link d d/e d/file" {
			t.Errorf("depth 2: %q", names(es))
		}
		if es[4].Size != 5 || es[4].Mode != 0o600 || es[4].Name != "file" || es[4].Mtime.IsZero() {
			t.Errorf("d/file: %+v", es[4])
		}
		// Unlimited depth does not descend through the symlink.
		es, _ = listAll(t, tg, wire.FileListArgs{Path: w, Depth: -1})
		if names(es) != "b c-link d d/e d/e/f d/e/f/deep d/file" {
			t.Errorf("depth -1: %q", names(es))
		}
		// The listed directory itself may be a symlink.
		es, _ = listAll(t, tg, wire.FileListArgs{Path: "c-link"})
		if names(es) != "e file" {
			t.Errorf("list through a link: %q", names(es))
		}
		// Many entries arrive in several batches, complete and sorted.
		os.Mkdir(filepath.Join(w, "many"), 0o755)
		for i := range 3000 {
			os.WriteFile(filepath.Join(w, "many", fmt.Sprintf("%05d-%s", i, strings.Repeat("n", 40))), nil, 0o644)
		}
		batches := 0
		var all []wire.FileStat
		err = tg.client.ListDir(testCtx(t), wire.FileListArgs{Path: "many"}, func(b []wire.FileStat) error {
			batches++
			all = append(all, b...)
			return nil
		})
		if err != nil || len(all) != 3000 || batches < 2 || !sort.SliceIsSorted(all, func(i, j int) bool { return all[i].Name < all[j].Name }) {
			t.Errorf("3000 entries: %d in %d batches, %v", len(all), batches, err)
		}
		if _, err := listAll(t, tg, wire.FileListArgs{Path: "b"}); !errdefs.IsFailedPrecondition(err) {
			t.Errorf("list of a file: %v", err)
		}
		if _, err := listAll(t, tg, wire.FileListArgs{Path: "nope"}); !errdefs.IsNotFound(err) {
			t.Errorf("list of a missing dir: %v", err)
		}
	})
}

func TestFileMkdirRemoveRenameChmod(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		ctx := testCtx(t)
		w := tg.workdir
		if err := tg.client.MakeDir(ctx, wire.FileMkdirArgs{Path: "m1", Mode: u32(0o700)}); err != nil {
			t.Fatal(err)
		}
		if st, err := os.Stat(filepath.Join(w, "m1")); err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
			t.Errorf("mkdir: %v %v", st, err)
		}
		if err := tg.client.MakeDir(ctx, wire.FileMkdirArgs{Path: "m1"}); !errdefs.IsAlreadyExists(err) {
			t.Errorf("mkdir of an existing dir: %v", err)
		}
		if err := tg.client.MakeDir(ctx, wire.FileMkdirArgs{Path: "m1", Parents: true}); err != nil {
			t.Errorf("mkdir -p of an existing dir: %v", err)
		}
		if err := tg.client.MakeDir(ctx, wire.FileMkdirArgs{Path: "p/q/r", Parents: true, Mode: u32(0o777)}); err != nil {
			t.Fatal(err)
		}
		if st, _ := os.Stat(filepath.Join(w, "p/q/r")); st.Mode().Perm() != 0o777 {
			t.Errorf("mode is applied exactly, not filtered by the umask: %v", st.Mode())
		}
		if err := tg.client.MakeDir(ctx, wire.FileMkdirArgs{Path: "x/y"}); !errdefs.IsNotFound(err) {
			t.Errorf("mkdir without parents: %v", err)
		}
		os.WriteFile(filepath.Join(w, "file"), nil, 0o644)
		if err := tg.client.MakeDir(ctx, wire.FileMkdirArgs{Path: "file", Parents: true}); !errdefs.IsFailedPrecondition(err) {
			t.Errorf("mkdir -p over a file: %v", err)
		}

		// Remove: a non-empty directory needs recursive.
		os.WriteFile(filepath.Join(w, "p/q/r/f"), nil, 0o644)
		err := tg.client.RemovePath(ctx, wire.FileRemoveArgs{Path: "p"})
		if !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "not empty") {
			t.Errorf("remove of a non-empty dir: %v", err)
		}
		if err := tg.client.RemovePath(ctx, wire.FileRemoveArgs{Path: "p", Recursive: true}); err != nil {
			t.Fatal(err)
		}
		if err := tg.client.RemovePath(ctx, wire.FileRemoveArgs{Path: "m1"}); err != nil {
			t.Errorf("remove of an empty dir: %v", err)
		}
		if err := tg.client.RemovePath(ctx, wire.FileRemoveArgs{Path: "p"}); !errdefs.IsNotFound(err) {
			t.Errorf("remove of a missing path: %v", err)
		}

		// Rename, with and without overwriting.
		os.WriteFile(filepath.Join(w, "r1"), []byte("1"), 0o644)
		os.WriteFile(filepath.Join(w, "r2"), []byte("2"), 0o644)
		if err := tg.client.RenamePath(ctx, wire.FileRenameArgs{Src: "r1", Dst: "r2", NoOverwrite: true}); !errdefs.IsAlreadyExists(err) {
			t.Errorf("rename without overwrite: %v", err)
		}
		if err := tg.client.RenamePath(ctx, wire.FileRenameArgs{Src: "r1", Dst: filepath.Join(w, "r2")}); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(filepath.Join(w, "r2")); string(b) != "1" {
			t.Errorf("after rename: %q", b)
		}
		if err := tg.client.RenamePath(ctx, wire.FileRenameArgs{Src: "r1", Dst: "r3"}); !errdefs.IsNotFound(err) {
			t.Errorf("rename of a missing file: %v", err)
		}

		// Chmod, setuid and sticky bits included.
		if err := tg.client.ChmodPath(ctx, wire.FileChmodArgs{Path: "r2", Mode: 0o4751}); err != nil {
			t.Fatal(err)
		}
		if st, _ := os.Stat(filepath.Join(w, "r2")); st.Mode()&(os.ModePerm|os.ModeSetuid) != 0o751|os.ModeSetuid {
			t.Errorf("chmod: %v", st.Mode())
		}
		if err := tg.client.ChmodPath(ctx, wire.FileChmodArgs{Path: "r2", Mode: 0o20000}); !errdefs.IsInvalidArgument(err) {
			t.Errorf("chmod beyond 07777: %v", err)
		}
		if err := tg.client.ChmodPath(ctx, wire.FileChmodArgs{Path: "nope", Mode: 0o644}); !errdefs.IsNotFound(err) {
			t.Errorf("chmod of a missing file: %v", err)
		}
	})
}

// TestFileAsUser: operations as another user get that user's permission
// checks, and the identity never leaks into operations running as root.
func TestFileAsUser(t *testing.T) {
	requireRoot(t)
	forEachTarget(t, func(t *testing.T, tg *target) {
		ctx := testCtx(t)
		openToOthers(t, tg)
		w := tg.workdir
		os.WriteFile(filepath.Join(w, "root-only"), []byte("top secret"), 0o600)
		os.Mkdir(filepath.Join(w, "nobody-dir"), 0o755)
		os.Chown(filepath.Join(w, "nobody-dir"), 65534, 65534)
		const nobody = "65534"

		_, _, err := readString(t, tg, wire.FileReadArgs{Path: "root-only", User: nobody})
		if !errdefs.IsPermissionDenied(err) {
			t.Errorf("read of a root 0600 file as nobody: %v", err)
		}
		if _, err := tg.client.WriteFile(ctx, wire.FileWriteArgs{Path: "root-only", User: nobody}, strings.NewReader("x")); !errdefs.IsPermissionDenied(err) {
			t.Errorf("write into a root directory as nobody: %v", err)
		}
		if err := tg.client.ChmodPath(ctx, wire.FileChmodArgs{Path: "root-only", Mode: 0o644, User: nobody}); !errdefs.IsPermissionDenied(err) {
			t.Errorf("chmod of root's file as nobody: %v", err)
		}
		if err := tg.client.RemovePath(ctx, wire.FileRemoveArgs{Path: "root-only", User: nobody}); !errdefs.IsPermissionDenied(err) {
			t.Errorf("remove of root's file as nobody: %v", err)
		}
		res, err := tg.client.WriteFile(ctx, wire.FileWriteArgs{Path: "nobody-dir/mine", User: nobody}, strings.NewReader("mine"))
		if err != nil || res.Stat.UID != 65534 {
			t.Fatalf("write as nobody in its directory: %+v %v", res, err)
		}
		if err := tg.client.MakeDir(ctx, wire.FileMkdirArgs{Path: "nobody-dir/sub", User: nobody}); err != nil {
			t.Errorf("mkdir as nobody: %v", err)
		}
		fi, err := tg.client.StatFile(ctx, wire.FileStatArgs{Path: "nobody-dir/sub"})
		if err != nil || fi.UID != 65534 {
			t.Errorf("directory made as nobody: %+v %v", fi, err)
		}
		// Root replacing nobody's file keeps its owner.
		res, err = tg.client.WriteFile(ctx, wire.FileWriteArgs{Path: "nobody-dir/mine"}, strings.NewReader("root wrote"))
		if err != nil || res.Stat.UID != 65534 || res.Stat.GID != 65534 {
			t.Errorf("root replacing nobody's file: %+v %v", res, err)
		}
		// Listing a directory nobody cannot read: the entry says so.
		os.Mkdir(filepath.Join(w, "closed"), 0o700)
		es, err := listAll(t, tg, wire.FileListArgs{Path: ".", Depth: 2, User: nobody})
		found := false
		for _, e := range es {
			if e.Path == "closed" {
				found = e.Error == "permission denied"
			}
		}
		if err != nil || !found {
			t.Errorf("list as nobody: %+v %v", es, err)
		}
		if _, err := tg.client.StatFile(ctx, wire.FileStatArgs{Path: ".", User: "no-such-user"}); !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), "no-such-user") {
			t.Errorf("unknown user: %v", err)
		}
		if _, err := tg.client.StatFile(ctx, wire.FileStatArgs{Path: ".", User: "a:b:c"}); !errdefs.IsInvalidArgument(err) {
			t.Errorf("malformed user: %v", err)
		}

		// Many operations at once, half as nobody: root's must all
		// succeed and nobody's all fail.
		var wg sync.WaitGroup
		errs := make(chan string, 200)
		for i := range 100 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if i%2 == 0 {
					if _, _, err := readString(t, tg, wire.FileReadArgs{Path: "root-only"}); err != nil {
						errs <- fmt.Sprintf("root read failed: %v", err)
					}
				} else if _, _, err := readString(t, tg, wire.FileReadArgs{Path: "root-only", User: nobody}); !errdefs.IsPermissionDenied(err) {
					errs <- fmt.Sprintf("nobody read: %v", err)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Error(e)
		}
	})
}

func TestFileUploadDownload(t *testing.T) {
	requireRoot(t)
	forEachTarget(t, func(t *testing.T, tg *target) {
		ctx := testCtx(t)
		openToOthers(t, tg)
		w := tg.workdir
		big := make([]byte, 2*wire.FileChunk+77)
		rand.Read(big)
		items := []struct {
			wire.UploadItem
			data []byte
		}{
			{wire.UploadItem{Path: "up/a.txt"}, []byte("a")},
			{wire.UploadItem{Path: "bad\x00name"}, []byte("never")},
			{wire.UploadItem{Path: "up/deep/big.bin", Mode: u32(0o600)}, big},
			{wire.UploadItem{Path: "up"}, []byte("a directory")},
			{wire.UploadItem{Path: "up/empty"}, nil},
		}
		i := 0
		var results []wire.FileResult
		err := tg.client.UploadFiles(ctx, wire.UploadArgs{Parents: true}, func() (wire.UploadItem, io.Reader, error) {
			if i == len(items) {
				return wire.UploadItem{}, nil, io.EOF
			}
			it := items[i]
			i++
			return it.UploadItem, bytes.NewReader(it.data), nil
		}, func(r wire.FileResult) error {
			results = append(results, r)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		wantCodes := []string{"", wire.CodeInvalidArgument, "", wire.CodeFailedPrecondition, ""}
		if len(results) != len(items) {
			t.Fatalf("%d results for %d files: %+v", len(results), len(items), results)
		}
		for i, r := range results {
			if r.Index != i || r.Code != wantCodes[i] || (r.Code == "" && r.Size != int64(len(items[i].data))) {
				t.Errorf("result %d: %+v, want code %q", i, r, wantCodes[i])
			}
		}
		if b, _ := os.ReadFile(filepath.Join(w, "up/deep/big.bin")); !bytes.Equal(b, big) {
			t.Errorf("big file differs")
		}
		if st, _ := os.Stat(filepath.Join(w, "up/deep/big.bin")); st.Mode().Perm() != 0o600 {
			t.Errorf("mode of big file: %v", st.Mode())
		}

		// As nobody, into a root-owned directory: every file fails,
		// the call itself does not.
		results = nil
		i = 0
		err = tg.client.UploadFiles(ctx, wire.UploadArgs{User: "65534"}, func() (wire.UploadItem, io.Reader, error) {
			if i == 2 {
				return wire.UploadItem{}, nil, io.EOF
			}
			i++
			return wire.UploadItem{Path: fmt.Sprintf("up/n%d", i)}, strings.NewReader("x"), nil
		}, func(r wire.FileResult) error { results = append(results, r); return nil })
		if err != nil || len(results) != 2 || results[0].Code != wire.CodePermissionDenied || results[1].Code != wire.CodePermissionDenied {
			t.Errorf("upload as nobody: %+v %v", results, err)
		}

		// Download: a missing file and a directory fail alone.
		got := map[int]*bytes.Buffer{}
		var done []wire.FileResult
		err = tg.client.DownloadFiles(ctx, wire.DownloadArgs{Paths: []string{"up/a.txt", "up/missing", "up/deep/big.bin", "up", "up/empty"}}, host.DownloadHandler{
			Start: func(i int, fi wire.FileStat) error { got[i] = new(bytes.Buffer); return nil },
			Data:  func(i int, p []byte) error { got[i].Write(p); return nil },
			Done:  func(r wire.FileResult) error { done = append(done, r); return nil },
		})
		if err != nil {
			t.Fatal(err)
		}
		wantCodes = []string{"", wire.CodeNotFound, "", wire.CodeFailedPrecondition, ""}
		for i, r := range done {
			if r.Code != wantCodes[i] {
				t.Errorf("download %d: %+v, want %q", i, r, wantCodes[i])
			}
		}
		if got[0].String() != "a" || !bytes.Equal(got[2].Bytes(), big) || got[4].Len() != 0 || got[1] != nil {
			t.Errorf("downloaded content wrong")
		}
		err = tg.client.DownloadFiles(ctx, wire.DownloadArgs{Paths: make([]string, wire.MaxBulkFiles+1)}, host.DownloadHandler{})
		if !errdefs.IsResourceExhausted(err) {
			t.Errorf("too many paths: %v", err)
		}
	})
}

// TestFileUploadMany is the bulk target in miniature: a thousand small
// files in one call.
func TestFileUploadMany(t *testing.T) {
	tg := startInit(t)
	ctx := testCtx(t)
	const n = 1000
	i := 0
	ok := 0
	start := time.Now()
	err := tg.client.UploadFiles(ctx, wire.UploadArgs{Parents: true}, func() (wire.UploadItem, io.Reader, error) {
		if i == n {
			return wire.UploadItem{}, nil, io.EOF
		}
		i++
		return wire.UploadItem{Path: fmt.Sprintf("many/d%d/f%d.txt", i%10, i)}, strings.NewReader(strings.Repeat("x", 1000)), nil
	}, func(r wire.FileResult) error {
		if r.Code == "" {
			ok++
		}
		return nil
	})
	elapsed := time.Since(start)
	if err != nil || ok != n {
		t.Fatalf("%d of %d files written: %v", ok, n, err)
	}
	t.Logf("%d files in %v", n, elapsed)
	if elapsed > 5*time.Second {
		t.Errorf("%d small files took %v", n, elapsed)
	}
}

func TestFileWatch(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		w := tg.workdir
		os.MkdirAll(filepath.Join(w, "watched/old"), 0o755)
		os.WriteFile(filepath.Join(w, "watched/f"), nil, 0o644)
		root := filepath.Join(w, "watched")

		ctx, cancel := context.WithCancel(testCtx(t))
		defer cancel()
		evc, errc := startWatch(ctx, t, tg, wire.WatchArgs{Path: "watched", Recursive: true})
		expect := func(want wire.WatchEvent) {
			t.Helper()
			timeout := time.After(5 * time.Second)
			var seen []wire.WatchEvent
			for {
				select {
				case ev := <-evc:
					if ev == want {
						return
					}
					seen = append(seen, ev)
				case <-timeout:
					t.Fatalf("no event %+v; saw %+v", want, seen)
				}
			}
		}
		os.WriteFile(filepath.Join(root, "new"), []byte("x"), 0o644)
		expect(wire.WatchEvent{Path: root + "/new", Op: wire.WatchCreate})
		expect(wire.WatchEvent{Path: root + "/new", Op: wire.WatchWrite})
		os.Chmod(filepath.Join(root, "new"), 0o600)
		expect(wire.WatchEvent{Path: root + "/new", Op: wire.WatchChmod})
		os.Rename(filepath.Join(root, "new"), filepath.Join(root, "renamed"))
		expect(wire.WatchEvent{Path: root + "/renamed", Op: wire.WatchRename, OldPath: root + "/new"})
		os.Remove(filepath.Join(root, "renamed"))
		expect(wire.WatchEvent{Path: root + "/renamed", Op: wire.WatchRemove})
		// Recursive: an existing subdirectory, and new ones made in one go
		// with files in them before the watch could be added.
		os.WriteFile(filepath.Join(root, "old/in-old"), nil, 0o644)
		expect(wire.WatchEvent{Path: root + "/old/in-old", Op: wire.WatchCreate})
		os.MkdirAll(filepath.Join(root, "n1/n2/n3"), 0o755)
		os.WriteFile(filepath.Join(root, "n1/n2/n3/leaf"), nil, 0o644)
		expect(wire.WatchEvent{Path: root + "/n1", Op: wire.WatchCreate, IsDir: true})
		expect(wire.WatchEvent{Path: root + "/n1/n2/n3/leaf", Op: wire.WatchCreate})
		// A renamed directory's events carry the new path.
		os.Rename(filepath.Join(root, "n1"), filepath.Join(root, "m1"))
		expect(wire.WatchEvent{Path: root + "/m1", Op: wire.WatchRename, OldPath: root + "/n1", IsDir: true})
		os.WriteFile(filepath.Join(root, "m1/n2/after"), nil, 0o644)
		expect(wire.WatchEvent{Path: root + "/m1/n2/after", Op: wire.WatchCreate})
		// Removing the watched directory ends the watch cleanly.
		os.RemoveAll(root)
		select {
		case err := <-errc:
			if err != nil {
				t.Fatalf("watch ended with %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("watch did not end when its directory went away")
		}
		if _, err := listAll(t, tg, wire.FileListArgs{Path: "."}); err != nil {
			t.Fatal(err)
		}
		// Cancelling ends a watch too.
		os.Mkdir(root, 0o755)
		ctx2, cancel2 := context.WithCancel(testCtx(t))
		if err := tg.client.Watch(ctx2, wire.WatchArgs{Path: root}, cancel2, func([]wire.WatchEvent) error { return nil }); !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled watch: %v", err)
		}
		if err := tg.client.Watch(testCtx(t), wire.WatchArgs{Path: "nope"}, nil, nil); !errdefs.IsNotFound(err) {
			t.Errorf("watch of a missing path: %v", err)
		}
	})
}

// TestFileLargeStreamBoundedMemory writes and reads 256 MiB through the
// in-process server and checks the Go heap never holds more than a few
// chunks of it.
func TestFileLargeStreamBoundedMemory(t *testing.T) {
	tg := startServer(t)
	ctx := testCtx(t)
	const size = 256 << 20
	p := filepath.Join(tg.workdir, "large")
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var ms runtimeMemStats
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			if h := ms.heapInUse(); h > peak.Load() {
				peak.Store(h)
			}
		}
	}()
	base := (&runtimeMemStats{}).heapInUse()
	if _, err := tg.client.WriteFile(ctx, wire.FileWriteArgs{Path: p}, io.LimitReader(zeroReader{}, size)); err != nil {
		t.Fatal(err)
	}
	s, err := tg.client.ReadFile(ctx, wire.FileReadArgs{Path: p})
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, s)
	s.Close()
	close(stop)
	<-sampled
	if err != nil || n != size {
		t.Fatalf("read back %d bytes: %v", n, err)
	}
	growth := int64(peak.Load()) - int64(base)
	t.Logf("heap in use grew by at most %d KiB while moving %d MiB each way", growth>>10, size>>20)
	if growth > 32<<20 {
		t.Errorf("heap grew by %d MiB for a %d MiB file", growth>>20, size>>20)
	}
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// FuzzFileResolve sends arbitrary paths to a real server, confined to a
// tree of files, directories and hostile symlinks (loops, dangling, chains,
// a FIFO): every answer is a result or a classified error, never an
// internal error, a protocol error or a hang.
func FuzzFileResolve(f *testing.F) {
	for _, s := range []string{"", "f", "d/f", "loop1", "loop1/x", "chain", "chain/f", "dangling", "fifo", "d", "d/../f",
		"./././f", "d//f", "self/self/self/f", "up/f", strings.Repeat("d/../", 50) + "f", "f\x00", "\xff"} {
		f.Add(s)
	}
	tg := startQuietServer(f)
	w := tg.workdir
	os.MkdirAll(filepath.Join(w, "d"), 0o755)
	os.WriteFile(filepath.Join(w, "f"), []byte("file"), 0o644)
	os.WriteFile(filepath.Join(w, "d/f"), []byte("file"), 0o644)
	os.Symlink("loop2", filepath.Join(w, "loop1"))
	os.Symlink("loop1", filepath.Join(w, "loop2"))
	os.Symlink("d", filepath.Join(w, "chain"))
	os.Symlink("nowhere", filepath.Join(w, "dangling"))
	os.Symlink(".", filepath.Join(w, "self"))
	os.Symlink("..", filepath.Join(w, "d/up"))
	os.Symlink("d/up", filepath.Join(w, "up"))
	syscall.Mkfifo(filepath.Join(w, "fifo"), 0o644)
	f.Fuzz(func(t *testing.T, p string) {
		if strings.Contains(p, "..") && strings.Count(p, "..") > strings.Count(p, "d/..") {
			return // stay inside the tree: ".." could climb to the host's real files
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		full := tg.workdir + "/" + p
		check := func(op string, err error) {
			if err == nil {
				return
			}
			var re *wire.RemoteError
			if !errors.As(err, &re) {
				t.Fatalf("%s %q: unclassified error %v", op, p, err)
			}
			switch re.Code {
			case wire.CodeNotFound, wire.CodeInvalidArgument, wire.CodePermissionDenied, wire.CodeFailedPrecondition:
			default:
				t.Fatalf("%s %q: %s error %v", op, p, re.Code, err)
			}
		}
		_, err := tg.client.StatFile(ctx, wire.FileStatArgs{Path: full, Follow: len(p)%2 == 0})
		check("stat", err)
		if s, err := tg.client.ReadFile(ctx, wire.FileReadArgs{Path: full, Length: 16, NoFollow: len(p)%3 == 0}); err != nil {
			check("read", err)
		} else {
			_, err = io.Copy(io.Discard, s)
			s.Close()
			check("read", err)
		}
		check("list", tg.client.ListDir(ctx, wire.FileListArgs{Path: full, Depth: 2}, func([]wire.FileStat) error { return nil }))
	})
}

// startQuietServer is startServer without logging: a fuzz target may not
// log through its testing.F, and the server logs every refused request.
func startQuietServer(tb testing.TB) *target {
	d := shortTempDir(tb)
	wd := filepath.Join(d, "work")
	if err := os.Mkdir(wd, 0o755); err != nil {
		tb.Fatal(err)
	}
	ln, err := Listen(filepath.Join(d, "run", wire.SocketName))
	if err != nil {
		tb.Fatal(err)
	}
	srv := &Server{BaseEnv: baseEnv(), Workdir: wd}
	go srv.Serve(ln)
	tb.Cleanup(func() { srv.Close() })
	return &target{client: host.NewClient(ln.Addr().String()), socket: ln.Addr().String(), workdir: wd}
}
