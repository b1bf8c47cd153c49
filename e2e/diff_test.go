//go:build linux

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"connectrpc.com/connect"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// diffOf returns a sandbox's changes through the API, and the last
// message's flags.
func diffOf(t *testing.T, id, since string, patch bool) ([]*boxdv1.DiffEntry, *boxdv1.DiffSandboxResponse) {
	t.Helper()
	s, err := env.api.DiffSandbox(ctx(t), connect.NewRequest(&boxdv1.DiffSandboxRequest{SandboxId: id, Since: since, Patch: patch}))
	if err != nil {
		t.Fatalf("diff %s since %q: %v", id, since, err)
	}
	defer s.Close()
	var out []*boxdv1.DiffEntry
	var last *boxdv1.DiffSandboxResponse
	for s.Receive() {
		last = s.Msg()
		out = append(out, last.Entries...)
	}
	if err := s.Err(); err != nil {
		t.Fatalf("diff %s since %q: %v", id, since, err)
	}
	if last == nil || !last.Done {
		t.Fatalf("diff %s since %q: no last message with done", id, since)
	}
	return out, last
}

// diffListing renders entries one a line: change, path (raw bytes
// quoted), type, mode, owner, link target.
func diffListing(es []*boxdv1.DiffEntry) string {
	var b strings.Builder
	for _, e := range es {
		p := e.Path
		if e.RawPath != nil {
			p = string(e.RawPath)
		}
		k := strings.TrimPrefix(e.Change.String(), "DIFF_CHANGE_")
		ty := strings.TrimPrefix(e.Type.String(), "FILE_TYPE_")
		fmt.Fprintf(&b, "%s %q %s %o %d:%d", k, p, ty, e.Mode, e.Uid, e.Gid)
		if e.LinkTarget != "" {
			fmt.Fprintf(&b, " -> %s", e.LinkTarget)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func wantDiff(t *testing.T, what string, es []*boxdv1.DiffEntry, want string) {
	t.Helper()
	if got := diffListing(es); got != want {
		t.Errorf("%s:\n%s\nwant:\n%s", what, got, want)
	}
}

// diffOps are writes, renames, deletes, chmods, mkdir and rmdir, symlinks
// (one out of the sandbox, one where a directory was), and names with a
// newline and a byte that is not UTF-8, on the busybox image.
const diffOps = `set -e
cd /workspace
echo one > a.txt
printf 'x\n' > b.txt; mv b.txt c.txt
echo extra >> /etc/os-release
chmod 600 /etc/hostname
mv /etc/group /etc/group.old
rm /etc/shadow
mkdir -p d/e
mkdir gone; rmdir gone
rmdir /home/sandbox
ln -s / link
rm -rf /usr/sbin; ln -s / /usr/sbin
touch "$(printf 'new\nline')" "$(printf 'bad\377name')"
chown 1000:1000 a.txt
`

// diffWant is what diffOps change, since the image.
const diffWant = `DELETED "/etc/group" REGULAR 644 0:0
ADDED "/etc/group.old" REGULAR 644 0:0
MODIFIED "/etc/hostname" REGULAR 600 0:0
MODIFIED "/etc/os-release" REGULAR 644 0:0
DELETED "/etc/shadow" REGULAR 640 0:0
DELETED "/home/sandbox" DIRECTORY 755 1000:1000
MODIFIED "/usr/sbin" SYMLINK 777 0:0 -> /
ADDED "/workspace/a.txt" REGULAR 644 1000:1000
ADDED "/workspace/bad\xffname" REGULAR 644 0:0
ADDED "/workspace/c.txt" REGULAR 644 0:0
ADDED "/workspace/d" DIRECTORY 755 0:0
ADDED "/workspace/d/e" DIRECTORY 755 0:0
ADDED "/workspace/link" SYMLINK 777 0:0 -> /
ADDED "/workspace/new\nline" REGULAR 644 0:0
`

// TestDiff: after a known set of changes the listing is exact (runc's
// mount points and what is under mounts left out), also read by boxctl
// with hostile names quoted; a fork lists its own changes since the fork
// and its source's with them since create; a commit's image is a base
// too, a same-size rewrite after it included; all of it again after boxd
// restarts. Bad since values are refused naming the field.
func TestDiff(t *testing.T) {
	id := newSandbox(t)
	if es, _ := diffOf(t, id, "", false); len(es) != 0 {
		t.Errorf("a fresh sandbox's diff:\n%s", diffListing(es))
	}
	sh(t, id, diffOps+"echo tmp > /tmp/not-in-the-layer")
	es, last := diffOf(t, id, "", false)
	wantDiff(t, "since create", es, diffWant)
	if last.Truncated || last.PatchTruncated {
		t.Errorf("truncated %v, patch truncated %v", last.Truncated, last.PatchTruncated)
	}
	out, err := boxctl(nil, "diff", id)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "\nA \"/workspace/new\\nline\"\n") || !strings.Contains(out, "\nA \"/workspace/bad\\xffname\"\n") ||
		!strings.HasPrefix(out, "D /etc/group\nA /etc/group.old\n") || strings.Count(out, "\n") != 14 {
		t.Errorf("boxctl diff:\n%s", out)
	}

	// A fork: its own changes since the fork, all of them since create.
	fork := strings.TrimSpace(mustOut(t, "fork", id))
	t.Cleanup(func() { _, _ = boxctl(nil, "rm", "-f", fork) })
	sh(t, fork, "echo f > /workspace/forked.txt; rm /workspace/a.txt")
	es, _ = diffOf(t, fork, "fork", false)
	wantDiff(t, "the fork since the fork", es, `DELETED "/workspace/a.txt" REGULAR 644 1000:1000
ADDED "/workspace/forked.txt" REGULAR 644 0:0
`)
	es, _ = diffOf(t, fork, "create", false)
	wantFork := strings.Replace(diffWant, `ADDED "/workspace/a.txt" REGULAR 644 1000:1000`+"\n", "", 1)
	wantFork = strings.Replace(wantFork, `ADDED "/workspace/d/e" DIRECTORY 755 0:0`+"\n", `ADDED "/workspace/d/e" DIRECTORY 755 0:0`+"\n"+`ADDED "/workspace/forked.txt" REGULAR 644 0:0`+"\n", 1)
	wantDiff(t, "the fork since create", es, wantFork)
	wantDiff(t, "the source after the fork", must1(diffOf(t, id, "", false)), diffWant)

	// A commit of the source, then a same-size rewrite and a new file.
	img := "boxd/diff-test:v1"
	mustOut(t, "commit", id, img)
	t.Cleanup(func() { _, _ = boxctl(nil, "image", "rm", "--force", img) })
	sh(t, id, "printf 'y\\n' > /workspace/c.txt; echo n > /workspace/after")
	es, _ = diffOf(t, id, img, false)
	wantDiff(t, "since the commit", es, `ADDED "/workspace/after" REGULAR 644 0:0
MODIFIED "/workspace/c.txt" REGULAR 644 0:0
`)

	// boxd restarts: the same answers, from the layers alone.
	killDaemon()
	if err := startDaemon(); err != nil {
		t.Fatal(err)
	}
	es, _ = diffOf(t, fork, "fork", false)
	wantDiff(t, "the fork since the fork, after a restart", es, `DELETED "/workspace/a.txt" REGULAR 644 1000:1000
ADDED "/workspace/forked.txt" REGULAR 644 0:0
`)
	es, _ = diffOf(t, id, img, false)
	if len(es) != 2 {
		t.Errorf("since the commit, after a restart:\n%s", diffListing(es))
	}

	for _, c := range []struct{ since, code, msg string }{
		{"fork", "failed_precondition", "was not made by a fork"},
		{testImage, "invalid_argument", "since: image " + testImage + " is not a commit of sandbox"},
		{"boxd/no-such-image:v9", "not_found", "since"},
		{"Bad Name!", "invalid_argument", "since"},
	} {
		_, err := env.api.DiffSandbox(ctx(t), connect.NewRequest(&boxdv1.DiffSandboxRequest{SandboxId: id, Since: c.since}))
		if err == nil {
			s, _ := env.api.DiffSandbox(ctx(t), connect.NewRequest(&boxdv1.DiffSandboxRequest{SandboxId: id, Since: c.since}))
			for s.Receive() {
			}
			err = s.Err()
		}
		if connect.CodeOf(err).String() != c.code || !strings.Contains(fmt.Sprint(err), c.msg) {
			t.Errorf("since %q: %v, want %s naming %q", c.since, err, c.code, c.msg)
		}
	}
}

func must1[A, B any](a A, _ B) A { return a }

// TestDiffPatch: --patch gives text files a unified diff, lists binary
// files without one, and cuts at 1 MiB a file with the flag set.
func TestDiffPatch(t *testing.T) {
	id := newSandbox(t)
	sh(t, id, `set -e
echo extra >> /etc/os-release
printf 'a\000b' > /workspace/bin
yes aaaaaaaaaaaaaaa | head -c 2000000 > /workspace/big
printf 'one\ntwo\n' > /workspace/t.txt
printf 'x\n' > "$(printf '/workspace/evil\n+++ bad')"
`)
	es, last := diffOf(t, id, "", true)
	got := map[string]*boxdv1.DiffEntry{}
	for _, e := range es {
		got[e.Path] = e
	}
	osr := got["/etc/os-release"]
	if osr == nil || !strings.HasPrefix(osr.Patch, "--- a/etc/os-release\n+++ b/etc/os-release\n@@ ") || !strings.HasSuffix(osr.Patch, "+extra\n") {
		t.Errorf("os-release's patch: %+v", osr)
	}
	if e := got["/workspace/t.txt"]; e == nil || e.Patch != "--- /dev/null\n+++ b/workspace/t.txt\n@@ -0,0 +1,2 @@\n+one\n+two\n" {
		t.Errorf("t.txt's patch: %+v", e)
	}
	if e := got["/workspace/bin"]; e == nil || !e.Binary || e.Patch != "" {
		t.Errorf("a binary file: %+v", e)
	}
	if e := got["/workspace/big"]; e == nil || !e.PatchTruncated || e.Patch != "" || !last.PatchTruncated {
		t.Errorf("a 2 MB file: %+v; last message %+v", e, last)
	}
	if e := got["/workspace/evil\n+++ bad"]; e == nil || !strings.HasPrefix(e.Patch, "--- /dev/null\n+++ \"b/workspace/evil\\n+++ bad\"\n@@") {
		t.Errorf("a file with a hostile name: %+v", e)
	}
	out, err := boxctl(nil, "diff", "--patch", id)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "A /workspace/t.txt\n--- /dev/null\n+++ b/workspace/t.txt\n") ||
		!strings.Contains(out, "Binary file /workspace/bin differs\n") || strings.Contains(out, "\n+++ bad") {
		t.Errorf("boxctl diff --patch:\n%s", out)
	}
}

// TestMCPDiff: boxctl mcp's sandbox_diff lists a session's sandbox's
// changes with patches, a hostile name quoted in its text.
func TestMCPDiff(t *testing.T) {
	cs := mcpSession(t)
	defer cs.Close()
	_, sb := call(t, cs, "sandbox_create", map[string]any{"ttl": "10m"}, false)
	id, _ := sb["id"].(string)
	defer env.api.DeleteSandbox(context.Background(), connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: id, Force: true}))
	call(t, cs, "exec", map[string]any{"sandbox_id": id, "command": `echo hi > /workspace/new; touch "$(printf '/workspace/x\nD y')"`}, false)
	text, out := call(t, cs, "sandbox_diff", map[string]any{"sandbox_id": id, "patch": true}, false)
	want := "A /workspace/new\n--- /dev/null\n+++ b/workspace/new\n@@ -0,0 +1,1 @@\n+hi\nA \"/workspace/x\\nD y\"\n"
	if text != want {
		t.Errorf("sandbox_diff text:\n%s\nwant:\n%s", text, want)
	}
	if es, _ := out["entries"].([]any); len(es) != 2 || out["truncated"] != false {
		t.Errorf("sandbox_diff structured: %v", out)
	}
}

// TestDiffRacingLayer: the sandbox swaps a directory for a symlink to /
// and back as fast as it can while boxd diffs it: every diff ends
// (listing or a clean error), none lists a path through the symlink (a
// walk that followed it would list the host's /), and boxd stays up.
func TestDiffRacingLayer(t *testing.T) {
	id := newSandbox(t)
	sh(t, id, `cd /workspace; (while :; do mkdir -p d/e; echo x > d/e/f; rm -rf d; ln -s / d; rm d; done) >/dev/null 2>&1 &`)
	for i := range 30 {
		s, err := env.api.DiffSandbox(ctx(t), connect.NewRequest(&boxdv1.DiffSandboxRequest{SandboxId: id, Patch: true}))
		if err != nil {
			t.Fatalf("diff %d: %v", i, err)
		}
		for s.Receive() {
			for _, e := range s.Msg().Entries {
				if p, ok := strings.CutPrefix(e.Path, "/workspace/d/"); ok && p != "e" && p != "e/f" {
					t.Errorf("diff %d lists %q: the walk went through the symlink", i, e.Path)
				}
			}
		}
		if err := s.Err(); err != nil {
			t.Logf("diff %d: %v", i, err) // the layer changed under it: an error is allowed, a hang or a crash is not
		}
	}
	if _, err := env.api.GetSandbox(ctx(t), connect.NewRequest(&boxdv1.GetSandboxRequest{Id: id})); err != nil {
		t.Fatalf("boxd after the racing diffs: %v", err)
	}
}
