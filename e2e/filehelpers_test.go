//go:build linux

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// TestFileHelpersAPI drives ReadLines, EditFile, Glob, Grep and ChownPath
// against a real sandbox: unicode, long lines, binary content, hostile
// names, symlinks that point out of the tree (and at host paths), users.
func TestFileHelpersAPI(t *testing.T) {
	id := newSandbox(t)
	c := ctx(t)
	api := filesAPI()
	// Content made inside the sandbox, as an agent's commands would.
	sh(t, id, `mkdir -p /workspace/p/src/deep /workspace/p/.git && cd /workspace/p &&
printf 'héllo wörld ✓\nTODO: 日本語\n' > src/u.txt &&
printf 'def f():\n    return 1\n\ndef g():\n    return 1\n' > src/m.py && chmod 750 src/m.py && chown 1000:1000 src/m.py src &&
(head -c 20000 /dev/zero | tr '\0' y; echo; echo TODO) > src/long.txt &&
printf 'ELF\0\1\2TODO\0' > src/bin.dat &&
printf 'TODO deep\n' > src/deep/d.py && printf 'TODO in git\n' > .git/config &&
printf 'TODO nl\n' > "src/new
line.py" && printf 'TODO bad\n' > "$(printf 'src/bad\377name.py')" && printf 'TODO dash\n' > src/-dash.py`)

	// ReadLines: numbered, unicode intact, long lines cut, binary flagged.
	rl, err := api.ReadLines(c, connect.NewRequest(&boxdv1.ReadLinesRequest{SandboxId: id, Path: "p/src/u.txt"}))
	if err != nil || len(rl.Msg.Lines) != 2 || rl.Msg.Lines[0].Text != "héllo wörld ✓" || rl.Msg.Lines[1].Number != 2 || rl.Msg.Lines[1].Text != "TODO: 日本語" || rl.Msg.MoreLines || rl.Msg.Binary {
		t.Fatalf("read lines: %v %v", rl, err)
	}
	rl, err = api.ReadLines(c, connect.NewRequest(&boxdv1.ReadLinesRequest{SandboxId: id, Path: "/workspace/p/src/long.txt", Limit: 1}))
	if err != nil || len(rl.Msg.Lines) != 1 || !rl.Msg.Lines[0].Cut || len(rl.Msg.Lines[0].Text) != 4096 || !rl.Msg.MoreLines || rl.Msg.NextOffset != 1 {
		t.Fatalf("long line: %v", err)
	}
	rl, err = api.ReadLines(c, connect.NewRequest(&boxdv1.ReadLinesRequest{SandboxId: id, Path: "p/src/m.py", Offset: 3, Limit: 1}))
	if err != nil || len(rl.Msg.Lines) != 1 || rl.Msg.Lines[0].Number != 4 || rl.Msg.Lines[0].Text != "def g():" {
		t.Fatalf("read window: %v %v", rl, err)
	}
	rl, err = api.ReadLines(c, connect.NewRequest(&boxdv1.ReadLinesRequest{SandboxId: id, Path: "p/src/bin.dat"}))
	if err != nil || !rl.Msg.Binary {
		t.Fatalf("binary: %v %v", rl, err)
	}
	_, err = api.ReadLines(c, connect.NewRequest(&boxdv1.ReadLinesRequest{SandboxId: id, Path: "p/src/u.txt", Limit: -1}))
	wantCode(t, "negative limit", err, connect.CodeInvalidArgument, "limit")

	// EditFile: twice without replace_all is refused and changes nothing.
	before := sh(t, id, "md5sum /workspace/p/src/m.py")
	_, err = api.EditFile(c, connect.NewRequest(&boxdv1.EditFileRequest{SandboxId: id, Path: "p/src/m.py", OldString: "return 1", NewString: "return 2"}))
	wantCode(t, "ambiguous edit", err, connect.CodeFailedPrecondition, "occurs 2 times")
	_, err = api.EditFile(c, connect.NewRequest(&boxdv1.EditFileRequest{SandboxId: id, Path: "p/src/m.py", OldString: "absent", NewString: "x"}))
	wantCode(t, "missing old_string", err, connect.CodeFailedPrecondition, "does not occur")
	_, err = api.EditFile(c, connect.NewRequest(&boxdv1.EditFileRequest{SandboxId: id, Path: "p/src/m.py", NewString: "x"}))
	wantCode(t, "empty old_string", err, connect.CodeInvalidArgument, "old_string")
	if got := sh(t, id, "md5sum /workspace/p/src/m.py"); got != before {
		t.Errorf("a refused edit changed the file")
	}
	ed, err := api.EditFile(c, connect.NewRequest(&boxdv1.EditFileRequest{SandboxId: id, Path: "p/src/m.py", OldString: "def g():\n    return 1", NewString: "def g():\n    return «2»"}))
	if err != nil || ed.Msg.Replacements != 1 || ed.Msg.Line != 4 {
		t.Fatalf("edit: %v %v", ed, err)
	}
	ed, err = api.EditFile(c, connect.NewRequest(&boxdv1.EditFileRequest{SandboxId: id, Path: "p/src/m.py", OldString: "return", NewString: "yield", ReplaceAll: true, User: "sandbox"}))
	if err != nil || ed.Msg.Replacements != 2 {
		t.Fatalf("edit all as sandbox: %v %v", ed, err)
	}
	if got := sh(t, id, "cat /workspace/p/src/m.py; stat -c '%a %u:%g' /workspace/p/src/m.py; ls -a /workspace/p/src | grep -c boxd || true"); got != "def f():\n    yield 1\n\ndef g():\n    yield «2»\n750 1000:1000\n0\n" {
		t.Errorf("after edits: %q", got)
	}
	// A user edits only what the kernel lets it.
	sh(t, id, "echo 'root only' > /workspace/p/root.txt && chmod 644 /workspace/p/root.txt")
	_, err = api.EditFile(c, connect.NewRequest(&boxdv1.EditFileRequest{SandboxId: id, Path: "p/root.txt", OldString: "root", NewString: "mine", User: "sandbox"}))
	wantCode(t, "edit root's file as sandbox", err, connect.CodePermissionDenied, "")

	// Glob: "**" walks the tree, dot directories and hostile names too.
	gl, err := api.Glob(c, connect.NewRequest(&boxdv1.GlobRequest{SandboxId: id, Pattern: "p/**/*.py"}))
	if err != nil || gl.Msg.Truncated {
		t.Fatalf("glob: %v %v", gl, err)
	}
	var paths []string
	for _, m := range gl.Msg.Matches {
		paths = append(paths, m.Path)
	}
	want := "/workspace/p/src/-dash.py|/workspace/p/src/bad\uFFFDname.py|/workspace/p/src/m.py|/workspace/p/src/new\nline.py|/workspace/p/src/deep/d.py"
	if got := strings.Join(paths, "|"); got != want {
		t.Errorf("glob p/**/*.py =\n%q\nwant\n%q", got, want)
	}
	_, err = api.Glob(c, connect.NewRequest(&boxdv1.GlobRequest{SandboxId: id, Pattern: "p/[src"}))
	wantCode(t, "bad glob", err, connect.CodeInvalidArgument, "pattern")

	// Grep: path, line number, text; binary files flagged; the glob filter.
	gr, err := api.Grep(c, connect.NewRequest(&boxdv1.GrepRequest{SandboxId: id, Pattern: "TODO", Path: "/workspace/p"}))
	if err != nil || gr.Msg.Truncated {
		t.Fatalf("grep: %v %v", gr, err)
	}
	var lines []string
	for _, m := range gr.Msg.Matches {
		if m.Binary {
			lines = append(lines, strings.TrimPrefix(m.Path, "/workspace/p/")+":binary")
			continue
		}
		text := m.Line.Text
		if m.Line.Cut {
			text = fmt.Sprintf("(%d bytes, cut)", len(text))
		}
		lines = append(lines, fmt.Sprintf("%s:%d:%s", strings.TrimPrefix(m.Path, "/workspace/p/"), m.Line.Number, text))
	}
	wantLines := ".git/config:1:TODO in git|src/-dash.py:1:TODO dash|src/bad\uFFFDname.py:1:TODO bad|src/bin.dat:binary|src/deep/d.py:1:TODO deep|src/long.txt:2:TODO|src/new\nline.py:1:TODO nl|src/u.txt:2:TODO: 日本語"
	if got := strings.Join(lines, "|"); got != wantLines {
		t.Errorf("grep TODO =\n%q\nwant\n%q", got, wantLines)
	}
	gr, err = api.Grep(c, connect.NewRequest(&boxdv1.GrepRequest{SandboxId: id, Pattern: "todo", IgnoreCase: true, Path: "p", Glob: "src/**/*.py", Limit: 2}))
	if err != nil || len(gr.Msg.Matches) != 2 || !gr.Msg.Truncated || !strings.Contains(gr.Msg.TruncatedReason, "limit") {
		t.Fatalf("grep with glob and limit: %v %v", gr, err)
	}
	_, err = api.Grep(c, connect.NewRequest(&boxdv1.GrepRequest{SandboxId: id, Pattern: "a(b"}))
	wantCode(t, "bad regexp", err, connect.CodeInvalidArgument, "pattern")

	// Symlinks that point out of the tree, and at host paths: a glob or grep
	// never follows them, an edit refuses a final one, and a host path means
	// nothing inside the sandbox.
	host := t.TempDir()
	secret := filepath.Join(host, "host-secret.py")
	must(t, os.WriteFile(secret, []byte("TODO host secret\n"), 0o644))
	sh(t, id, "mkdir -p /workspace/q && cd /workspace/q && echo 'TODO mine' > mine.py && ln -s /etc etc && ln -s / root && ln -s "+host+" hostdir && ln -s "+secret+" steal.py && ln -s /etc/passwd pw.py && ln -s . loop")
	gl, err = api.Glob(c, connect.NewRequest(&boxdv1.GlobRequest{SandboxId: id, Pattern: "**", Path: "/workspace/q"}))
	if err != nil || gl.Msg.Truncated || len(gl.Msg.Matches) != 7 {
		t.Fatalf("glob ** in q: %d matches, %v", len(gl.Msg.Matches), err)
	}
	for _, m := range gl.Msg.Matches {
		if m.Path != "/workspace/q/mine.py" && m.Type != boxdv1.FileType_FILE_TYPE_SYMLINK {
			t.Errorf("glob went through a link: %s", m.Path)
		}
	}
	gr, err = api.Grep(c, connect.NewRequest(&boxdv1.GrepRequest{SandboxId: id, Pattern: "root:|TODO", Path: "/workspace/q"}))
	if err != nil || len(gr.Msg.Matches) != 1 || gr.Msg.Matches[0].Path != "/workspace/q/mine.py" {
		t.Fatalf("grep in q followed a link: %v %v", gr, err)
	}
	_, err = api.ReadLines(c, connect.NewRequest(&boxdv1.ReadLinesRequest{SandboxId: id, Path: "q/steal.py"}))
	wantCode(t, "read a link to a host file", err, connect.CodeNotFound, "")
	pwBefore := sh(t, id, "md5sum /etc/passwd")
	_, err = api.EditFile(c, connect.NewRequest(&boxdv1.EditFileRequest{SandboxId: id, Path: "q/pw.py", OldString: "root", NewString: "pwned", ReplaceAll: true}))
	wantCode(t, "edit through a final symlink", err, connect.CodeFailedPrecondition, "symbolic link")
	_, err = api.ChownPath(c, connect.NewRequest(&boxdv1.ChownPathRequest{SandboxId: id, Path: "q/pw.py", Owner: "sandbox"}))
	wantCode(t, "chown through a final symlink", err, connect.CodeFailedPrecondition, "symbolic link")
	if _, err := api.ChownPath(c, connect.NewRequest(&boxdv1.ChownPathRequest{SandboxId: id, Path: "q", Owner: "sandbox:", Recursive: true})); err != nil {
		t.Fatal(err)
	}
	if got := sh(t, id, "md5sum /etc/passwd; stat -c '%u:%g' /etc/passwd /etc / /workspace/q /workspace/q/mine.py; stat -c %u /workspace/q/pw.py"); got != pwBefore+"0:0\n0:0\n0:0\n1000:1000\n1000:1000\n1000\n" {
		t.Errorf("after a recursive chown of q: %q", got)
	}
	if st, err := os.Stat(secret); err != nil || st.Sys() == nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(secret); string(b) != "TODO host secret\n" {
		t.Errorf("the host file changed: %q", b)
	}
	// chown: unknown owners name the field; a user cannot give files away.
	_, err = api.ChownPath(c, connect.NewRequest(&boxdv1.ChownPathRequest{SandboxId: id, Path: "q/mine.py", Owner: "ghost"}))
	wantCode(t, "unknown owner", err, connect.CodeInvalidArgument, "owner")
	_, err = api.ChownPath(c, connect.NewRequest(&boxdv1.ChownPathRequest{SandboxId: id, Path: "q/mine.py", Owner: "a b"}))
	wantCode(t, "bad owner", err, connect.CodeInvalidArgument, "owner")
	_, err = api.ChownPath(c, connect.NewRequest(&boxdv1.ChownPathRequest{SandboxId: id, Path: "q/mine.py", Owner: "0:0", User: "sandbox"}))
	wantCode(t, "give away as sandbox", err, connect.CodePermissionDenied, "")
}

// TestFileHelpersHugeTree: a glob or grep that would walk more entries than
// one call may stops at the budget and says so, quickly.
func TestFileHelpersHugeTree(t *testing.T) {
	id := newSandbox(t, "--memory", "1g")
	start := time.Now()
	// 16 directories of 13,000 empty files each: 208,016 entries, on the
	// /tmp tmpfs, which makes and drops them far faster than the overlay.
	sh(t, id, `mkdir /tmp/huge && cd /tmp/huge && for d in 0 1 2 3 4 5 6 7 8 9 a b c d e f; do mkdir $d && (cd $d && seq 1 13000 | xargs touch); done`)
	t.Logf("made the tree in %v", time.Since(start))
	c := ctx(t)
	api := filesAPI()
	start = time.Now()
	gl, err := api.Glob(c, connect.NewRequest(&boxdv1.GlobRequest{SandboxId: id, Pattern: "/tmp/huge/**/*.nomatch"}))
	if err != nil || !gl.Msg.Truncated || !strings.Contains(gl.Msg.TruncatedReason, "200000 directory entries") || len(gl.Msg.Matches) != 0 {
		t.Fatalf("glob over a huge tree: %v %v", gl, err)
	}
	t.Logf("glob stopped in %v: %s", time.Since(start), gl.Msg.TruncatedReason)
	start = time.Now()
	gl, err = api.Glob(c, connect.NewRequest(&boxdv1.GlobRequest{SandboxId: id, Pattern: "**", Path: "/tmp/huge", Limit: 10000}))
	if err != nil || !gl.Msg.Truncated || len(gl.Msg.Matches) != 10000 {
		t.Fatalf("glob ** with a limit: %d %v", len(gl.Msg.Matches), err)
	}
	t.Logf("glob ** with a limit took %v", time.Since(start))
	start = time.Now()
	// The glob filter leaves every file unopened: the walk alone hits the budget.
	gr, err := api.Grep(c, connect.NewRequest(&boxdv1.GrepRequest{SandboxId: id, Pattern: "x", Path: "/tmp/huge", Glob: "*.nomatch"}))
	if err != nil || !gr.Msg.Truncated || !strings.Contains(gr.Msg.TruncatedReason, "directory entries") || len(gr.Msg.Matches) != 0 {
		t.Fatalf("grep over a huge tree: %v %v", gr, err)
	}
	t.Logf("grep stopped in %v", time.Since(start))
	// The sandbox is still fine.
	if got := sh(t, id, "ls /tmp/huge/f | wc -l"); strings.TrimSpace(got) != "13000" {
		t.Errorf("after the walks: %q", got)
	}
}

// TestFileHelpersBoxctl: boxctl files read, edit, glob, grep and chown,
// with flags after the arguments as their usage writes them.
func TestFileHelpersBoxctl(t *testing.T) {
	id := newSandbox(t)
	sh(t, id, "mkdir -p /workspace/w/sub && printf 'one\\ntwo ✓\\nthree\\ntwo\\n' > /workspace/w/a.txt && echo 'two' > /workspace/w/sub/b.md")
	run := func(args ...string) string {
		t.Helper()
		out, err := boxctl(nil, append([]string{"files"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got := run("read", id, "w/a.txt", "--offset", "1", "--limit", "2"); got != "     2\ttwo ✓\n     3\tthree\n" {
		t.Errorf("read: %q", got)
	}
	if _, stderr, code := boxctlRun("files", "edit", id, "w/a.txt", "--old", "two", "--new", "2"); code != 1 || !strings.Contains(stderr, "failed_precondition") || !strings.Contains(stderr, "occurs 2 times") {
		t.Errorf("ambiguous edit: exit %d %q", code, stderr)
	}
	if got := run("edit", id, "w/a.txt", "--old", "two", "--new", "2", "--all"); got != "/workspace/w/a.txt: 2 replacement(s), the first at line 2\n" {
		t.Errorf("edit --all: %q", got)
	}
	if got := run("glob", id, "w/**/*"); got != "/workspace/w/a.txt\n/workspace/w/sub/\n/workspace/w/sub/b.md\n" {
		t.Errorf("glob: %q", got)
	}
	if got := run("grep", id, "^2", "w", "--glob", "*.txt"); got != "/workspace/w/a.txt:2:2 ✓\n/workspace/w/a.txt:4:2\n" {
		t.Errorf("grep: %q", got)
	}
	if out, _, code := boxctlRun("files", "grep", id, "nomatch", "w"); code != 1 || out != "" {
		t.Errorf("grep without a match: exit %d %q", code, out)
	}
	if _, stderr, code := boxctlRun("files", "grep", id, "(", "w"); code != 125 || !strings.Contains(stderr, "invalid_argument") {
		t.Errorf("grep with a bad pattern: exit %d %q", code, stderr)
	}
	run("chown", id, "sandbox:sandbox", "w", "-R")
	if got := sh(t, id, "stat -c %u:%g /workspace/w /workspace/w/sub/b.md"); got != "1000:1000\n1000:1000\n" {
		t.Errorf("after chown -R: %q", got)
	}
}
