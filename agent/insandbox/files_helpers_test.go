//go:build linux

package insandbox

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/containerd/errdefs"

	"github.com/boxd-dev/boxd/agent/wire"
)

func TestReadLines(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		ctx := testCtx(t)
		long := strings.Repeat("é", 5000) // 10000 bytes
		content := "héllo wörld ✓\n" + long + "\r\nthird\n\ninvalid \xff\xfe bytes\nlast without newline"
		must(t, os.WriteFile(filepath.Join(tg.workdir, "u.txt"), []byte(content), 0o644))
		res, err := tg.client.ReadLines(ctx, wire.ReadLinesArgs{Path: "u.txt"})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Lines) != 6 || !res.EOF || res.Full || res.Binary || res.Stat.Size != int64(len(content)) {
			t.Fatalf("result: %d lines eof=%v full=%v binary=%v", len(res.Lines), res.EOF, res.Full, res.Binary)
		}
		want := []string{"héllo wörld ✓", "", "third", "", "invalid \uFFFD bytes", "last without newline"}
		for i, l := range res.Lines {
			if l.N != int64(i+1) {
				t.Errorf("line %d numbered %d", i+1, l.N)
			}
			if i == 1 {
				// Cut at 4096 bytes, on a character boundary.
				if !l.Cut || l.T != strings.Repeat("é", 2048) {
					t.Errorf("long line: cut=%v %d bytes", l.Cut, len(l.T))
				}
				continue
			}
			if l.T != want[i] || l.Cut {
				t.Errorf("line %d = %q cut=%v, want %q", i+1, l.T, l.Cut, want[i])
			}
		}
		// A window, and a longer line limit.
		res, err = tg.client.ReadLines(ctx, wire.ReadLinesArgs{Path: "u.txt", Offset: 1, Limit: 2, MaxLineBytes: 20000})
		if err != nil || len(res.Lines) != 2 || res.EOF || res.Lines[0].N != 2 || res.Lines[0].T != long+"\r" || res.Lines[0].Cut || res.Lines[1].T != "third" {
			t.Fatalf("window: %+v %v", res, err)
		}
		// Past the end.
		res, err = tg.client.ReadLines(ctx, wire.ReadLinesArgs{Path: "u.txt", Offset: 100})
		if err != nil || len(res.Lines) != 0 || !res.EOF {
			t.Fatalf("past the end: %+v %v", res, err)
		}
		// Binary content is flagged.
		must(t, os.WriteFile(filepath.Join(tg.workdir, "bin"), []byte("ELF\x00\x01\x02\nmore\n"), 0o644))
		if res, err = tg.client.ReadLines(ctx, wire.ReadLinesArgs{Path: "bin"}); err != nil || !res.Binary || len(res.Lines) != 2 {
			t.Fatalf("binary: %+v %v", res, err)
		}
		// Many lines stop at the frame budget, and say so.
		var big bytes.Buffer
		for i := 0; i < 5000; i++ {
			fmt.Fprintf(&big, "%04d %s\n", i, strings.Repeat("x", 400))
		}
		must(t, os.WriteFile(filepath.Join(tg.workdir, "big"), big.Bytes(), 0o644))
		res, err = tg.client.ReadLines(ctx, wire.ReadLinesArgs{Path: "big", Limit: 5000})
		if err != nil || !res.Full || res.EOF || len(res.Lines) < 1000 || len(res.Lines) >= 5000 {
			t.Fatalf("budget: %d lines full=%v eof=%v %v", len(res.Lines), res.Full, res.EOF, err)
		}
		// Errors.
		if _, err := tg.client.ReadLines(ctx, wire.ReadLinesArgs{Path: "missing"}); !errdefs.IsNotFound(err) {
			t.Errorf("missing: %v", err)
		}
		if _, err := tg.client.ReadLines(ctx, wire.ReadLinesArgs{Path: "."}); !errdefs.IsFailedPrecondition(err) {
			t.Errorf("directory: %v", err)
		}
		if _, err := tg.client.ReadLines(ctx, wire.ReadLinesArgs{Path: "u.txt", Limit: wire.MaxReadLines + 1}); !errdefs.IsInvalidArgument(err) {
			t.Errorf("limit: %v", err)
		}
	})
}

func TestEditFile(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		ctx := testCtx(t)
		p := filepath.Join(tg.workdir, "e.py")
		must(t, os.WriteFile(p, []byte("def f():\n    return 1  # ✓\n\ndef g():\n    return 1\n"), 0o751))
		must(t, os.Chown(p, 1234, 4321))
		res, err := tg.client.EditFile(ctx, wire.EditArgs{Path: "e.py", Old: "return 1  # ✓", New: "return 2  # ✗"})
		if err != nil || res.Replacements != 1 || res.Line != 2 {
			t.Fatalf("edit: %+v %v", res, err)
		}
		st, _ := os.Stat(p)
		sys := st.Sys().(*syscallStat)
		if st.Mode().Perm() != 0o751 || sys.Uid != 1234 || sys.Gid != 4321 {
			t.Errorf("mode/owner not kept: %v %d:%d", st.Mode(), sys.Uid, sys.Gid)
		}
		// Twice without all: a clear error, the file unchanged.
		before, _ := os.ReadFile(p)
		_, err = tg.client.EditFile(ctx, wire.EditArgs{Path: "e.py", Old: "return", New: "yield"})
		if !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "occurs 2 times") {
			t.Errorf("ambiguous: %v", err)
		}
		if after, _ := os.ReadFile(p); !bytes.Equal(after, before) {
			t.Errorf("ambiguous edit changed the file: %q", after)
		}
		_, err = tg.client.EditFile(ctx, wire.EditArgs{Path: "e.py", Old: "nowhere", New: "x"})
		if !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "does not occur") {
			t.Errorf("missing: %v", err)
		}
		res, err = tg.client.EditFile(ctx, wire.EditArgs{Path: "e.py", Old: "return", New: "yield", All: true})
		if err != nil || res.Replacements != 2 || res.Line != 2 {
			t.Fatalf("all: %+v %v", res, err)
		}
		if got, _ := os.ReadFile(p); string(got) != "def f():\n    yield 2  # ✗\n\ndef g():\n    yield 1\n" {
			t.Errorf("content %q", got)
		}
		// Binary content is replaced byte for byte.
		must(t, os.WriteFile(filepath.Join(tg.workdir, "b"), []byte("\x00\xffKEY\x00"), 0o644))
		if _, err := tg.client.EditFile(ctx, wire.EditArgs{Path: "b", Old: "KEY", New: "k"}); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(filepath.Join(tg.workdir, "b")); string(got) != "\x00\xffk\x00" {
			t.Errorf("binary edit: %q", got)
		}
		// A final symlink is refused, its target untouched.
		must(t, os.Symlink("e.py", filepath.Join(tg.workdir, "link")))
		_, err = tg.client.EditFile(ctx, wire.EditArgs{Path: "link", Old: "yield", New: "x", All: true})
		if !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "symbolic link") {
			t.Errorf("symlink: %v", err)
		}
		if _, err := tg.client.EditFile(ctx, wire.EditArgs{Path: "e.py", Old: "", New: "x"}); !errdefs.IsInvalidArgument(err) {
			t.Errorf("empty old: %v", err)
		}
		// No temporary file is left behind by any of it.
		ents, _ := os.ReadDir(tg.workdir)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".boxd") {
				t.Errorf("left behind: %s", e.Name())
			}
		}
	})
}

func TestGlob(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		ctx := testCtx(t)
		w := tg.workdir
		for _, f := range []string{"a.go", "src/b.go", "src/deep/c.go", "src/deep/d.txt", ".hidden/e.go", "ünï/fé.go", "sp ace/new\nline.go"} {
			must(t, os.MkdirAll(filepath.Join(w, filepath.Dir(f)), 0o755))
			must(t, os.WriteFile(filepath.Join(w, f), []byte("x"), 0o644))
		}
		outside := shortTempDir(t)
		must(t, os.WriteFile(filepath.Join(outside, "secret.go"), []byte("x"), 0o644))
		must(t, os.Symlink(outside, filepath.Join(w, "src", "out")))
		must(t, os.Symlink(".", filepath.Join(w, "src", "loop")))
		glob := func(a wire.GlobArgs) []string {
			t.Helper()
			found, sum, err := tg.client.Glob(ctx, a)
			if err != nil || sum.Truncated {
				t.Fatalf("glob %q: %v %+v", a.Pattern, err, sum)
			}
			var out []string
			for _, f := range found {
				out = append(out, strings.TrimPrefix(f.Path, w+"/"))
			}
			return out
		}
		got := strings.Join(glob(wire.GlobArgs{Pattern: "**/*.go"}), ",")
		if got != "a.go,.hidden/e.go,sp ace/new\nline.go,src/b.go,src/deep/c.go,ünï/fé.go" {
			t.Errorf("**/*.go = %q", got)
		}
		if got := strings.Join(glob(wire.GlobArgs{Pattern: "src/*"}), ","); got != "src/b.go,src/deep,src/loop,src/out" {
			t.Errorf("src/* = %q", got)
		}
		if got := strings.Join(glob(wire.GlobArgs{Pattern: "*.txt", Path: "src/deep"}), ","); got != "src/deep/d.txt" {
			t.Errorf("*.txt in src/deep = %q", got)
		}
		if got := glob(wire.GlobArgs{Pattern: w + "/src/**"}); len(got) != 6 {
			t.Errorf("absolute src/** = %q", got)
		}
		// A link named in the pattern's literal part is followed, as every
		// file call follows the path it is given; below it nothing is.
		if got := glob(wire.GlobArgs{Pattern: "src/out/*"}); len(got) != 1 {
			t.Errorf("a named link: %q", got)
		}
		if got := glob(wire.GlobArgs{Pattern: "src/*/*.go"}); strings.Join(got, ",") != "src/deep/c.go" {
			t.Errorf("a symlinked directory was entered: %q", got)
		}
		if got := glob(wire.GlobArgs{Pattern: "nosuch/**"}); len(got) != 0 {
			t.Errorf("missing directory: %q", got)
		}
		// The limit truncates and says so.
		found, sum, err := tg.client.Glob(ctx, wire.GlobArgs{Pattern: "**", Limit: 3})
		if err != nil || len(found) != 3 || !sum.Truncated || !strings.Contains(sum.Reason, "limit") {
			t.Errorf("limit: %d %+v %v", len(found), sum, err)
		}
		if _, _, err := tg.client.Glob(ctx, wire.GlobArgs{Pattern: "src/[", Limit: 3}); !errdefs.IsInvalidArgument(err) {
			t.Errorf("bad pattern: %v", err)
		}
		if _, _, err := tg.client.Glob(ctx, wire.GlobArgs{Pattern: "*/../x"}); !errdefs.IsInvalidArgument(err) {
			t.Errorf("..: %v", err)
		}
	})
}

func TestGrep(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		ctx := testCtx(t)
		w := tg.workdir
		files := map[string]string{
			"a.py":        "import os\nTODO: fix ✓\nx = 1\n",
			"sub/b.py":    "# todo later\nTODO again\n",
			"sub/c.txt":   "TODO in text\n",
			"bin.dat":     "\x00\x01TODO\x00",
			"long.txt":    strings.Repeat("y", 10000) + "TODO" + "\n",
			"weird\nname": "TODO\n",
		}
		for f, c := range files {
			must(t, os.MkdirAll(filepath.Join(w, filepath.Dir(f)), 0o755))
			must(t, os.WriteFile(filepath.Join(w, f), []byte(c), 0o644))
		}
		outside := shortTempDir(t)
		must(t, os.WriteFile(filepath.Join(outside, "secret.py"), []byte("TODO secret\n"), 0o644))
		must(t, os.Symlink(outside, filepath.Join(w, "sub", "out")))
		must(t, os.Symlink(filepath.Join(outside, "secret.py"), filepath.Join(w, "sub", "s.py")))
		grep := func(a wire.GrepArgs) []string {
			t.Helper()
			found, sum, err := tg.client.Grep(ctx, a)
			if err != nil || sum.Truncated {
				t.Fatalf("grep %q: %v %+v", a.Pattern, err, sum)
			}
			var out []string
			for _, m := range found {
				s := fmt.Sprintf("%s:%d:%s", strings.TrimPrefix(m.Path, w+"/"), m.Line.N, m.Line.T)
				if m.Binary {
					s = strings.TrimPrefix(m.Path, w+"/") + ":binary"
				}
				if m.Line.Cut {
					s += "(cut)"
				}
				out = append(out, s)
			}
			return out
		}
		got := grep(wire.GrepArgs{Pattern: "TODO"})
		want := []string{"a.py:2:TODO: fix ✓", "bin.dat:binary", "long.txt:1:" + strings.Repeat("y", 4096) + "(cut)", "sub/b.py:2:TODO again", "sub/c.txt:1:TODO in text", "weird\nname:1:TODO"}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("grep TODO =\n%q\nwant\n%q", got, want)
		}
		if got := strings.Join(grep(wire.GrepArgs{Pattern: "todo", IgnoreCase: true, Glob: "*.py"}), "|"); got != "a.py:2:TODO: fix ✓|sub/b.py:1:# todo later|sub/b.py:2:TODO again" {
			t.Errorf("ignore case, *.py = %q", got)
		}
		if got := strings.Join(grep(wire.GrepArgs{Pattern: "TODO", Glob: "sub/**"}), "|"); got != "sub/b.py:2:TODO again|sub/c.txt:1:TODO in text" {
			t.Errorf("glob sub/** = %q", got)
		}
		if got := strings.Join(grep(wire.GrepArgs{Pattern: "x = 1", Literal: true, Path: "a.py"}), "|"); got != "a.py:3:x = 1" {
			t.Errorf("one file = %q", got)
		}
		found, sum, err := tg.client.Grep(ctx, wire.GrepArgs{Pattern: "TODO", Limit: 2})
		if err != nil || len(found) != 2 || !sum.Truncated {
			t.Errorf("limit: %d %+v %v", len(found), sum, err)
		}
		if _, _, err := tg.client.Grep(ctx, wire.GrepArgs{Pattern: "(unclosed"}); !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), "pattern") {
			t.Errorf("bad regexp: %v", err)
		}
		if _, _, err := tg.client.Grep(ctx, wire.GrepArgs{Pattern: "x", Path: "nosuch"}); !errdefs.IsNotFound(err) {
			t.Errorf("missing path: %v", err)
		}
	})
}

func TestChown(t *testing.T) {
	requireRoot(t)
	forEachTarget(t, func(t *testing.T, tg *target) {
		ctx := testCtx(t)
		w := tg.workdir
		must(t, os.MkdirAll(filepath.Join(w, "tree/sub"), 0o755))
		must(t, os.WriteFile(filepath.Join(w, "tree/sub/f"), []byte("x"), 0o644))
		outside := filepath.Join(shortTempDir(t), "target")
		must(t, os.WriteFile(outside, []byte("x"), 0o644))
		must(t, os.Symlink(outside, filepath.Join(w, "tree/link")))
		owner := func(p string) string {
			var st syscallStat
			must(t, lstatSys(p, &st))
			return fmt.Sprintf("%d:%d", st.Uid, st.Gid)
		}
		if err := tg.client.ChownPath(ctx, wire.ChownArgs{Path: "tree", Owner: "4242:4343", Recursive: true}); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"tree", "tree/sub", "tree/sub/f", "tree/link"} {
			if got := owner(filepath.Join(w, p)); got != "4242:4343" {
				t.Errorf("%s owned by %s", p, got)
			}
		}
		if got := owner(outside); got != "0:0" {
			t.Errorf("a symlink's target changed hands: %s", got)
		}
		if err := tg.client.ChownPath(ctx, wire.ChownArgs{Path: "tree/sub/f", Owner: ":77"}); err != nil || owner(filepath.Join(w, "tree/sub/f")) != "4242:77" {
			t.Errorf("group only: %v %s", err, owner(filepath.Join(w, "tree/sub/f")))
		}
		if err := tg.client.ChownPath(ctx, wire.ChownArgs{Path: "tree/link", Owner: "0"}); !errdefs.IsFailedPrecondition(err) {
			t.Errorf("final symlink: %v", err)
		}
		if err := tg.client.ChownPath(ctx, wire.ChownArgs{Path: "tree", Owner: "nosuchuser"}); !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), "owner") {
			t.Errorf("unknown user: %v", err)
		}
		// As an unprivileged user, giving a file away is refused.
		openToOthers(t, tg)
		if err := tg.client.ChownPath(ctx, wire.ChownArgs{Path: "tree/sub/f", Owner: "0", User: "4242"}); !errdefs.IsPermissionDenied(err) {
			t.Errorf("give away as a user: %v", err)
		}
	})
}

func TestResolveOwner(t *testing.T) {
	passwd := []byte("root:x:0:0::/root:/bin/sh\nagent:x:1000:1001::/home/agent:/bin/sh\n")
	group := []byte("root:x:0:\nagents:x:1001:\nstaff:x:50:agent\n")
	for spec, want := range map[string][2]int{
		"agent":       {1000, -1},
		"agent:":      {1000, 1001},
		"agent:staff": {1000, 50},
		":staff":      {-1, 50},
		"1000:":       {1000, 1001},
		"77:88":       {77, 88},
		"root:agents": {0, 1001},
	} {
		uid, gid, err := fsResolveOwner(spec, passwd, group)
		if err != nil || uid != want[0] || gid != want[1] {
			t.Errorf("%q: %d %d %v, want %v", spec, uid, gid, err, want)
		}
	}
	for _, spec := range []string{"ghost", "agent:ghosts", "77:"} {
		if _, _, err := fsResolveOwner(spec, passwd, group); err == nil || !strings.Contains(err.Error(), "owner") {
			t.Errorf("%q: %v", spec, err)
		}
	}
}

type syscallStat = syscall.Stat_t

func lstatSys(p string, st *syscall.Stat_t) error { return syscall.Lstat(p, st) }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
