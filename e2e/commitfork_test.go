//go:build linux

package e2e

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/platforms"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// storeState lists what containerd holds in the test namespace: every
// snapshot, content blob and lease. Commit and fork must leave it as it was
// once what they made is removed, and failed calls must not change it.
func storeState(t *testing.T) string {
	t.Helper()
	c := namespaces.WithNamespace(ctx(t), namespace)
	var snaps, blobs, ls []string
	if err := env.ctr.SnapshotService("overlayfs").Walk(c, func(_ context.Context, info snapshots.Info) error {
		snaps = append(snaps, info.Name)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := env.ctr.ContentStore().Walk(c, func(info content.Info) error {
		blobs = append(blobs, info.Digest.String())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	all, err := env.ctr.LeasesService().List(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range all {
		ls = append(ls, l.ID)
	}
	slices.Sort(snaps)
	slices.Sort(blobs)
	slices.Sort(ls)
	return fmt.Sprintf("snapshots %v\ncontent %v\nleases %v", snaps, blobs, ls)
}

// committedImage reads an image's config and its top layer's tar headers
// straight from the content store: what a push would send.
func committedImage(t *testing.T, ref string) (ocispec.Image, map[string]*tar.Header) {
	t.Helper()
	c := namespaces.WithNamespace(ctx(t), namespace)
	rec, err := env.ctr.ImageService().Get(c, ref)
	if err != nil {
		t.Fatal(err)
	}
	cs := env.ctr.ContentStore()
	mf, err := images.Manifest(c, cs, rec.Target, platforms.Default())
	if err != nil {
		t.Fatal(err)
	}
	b, err := content.ReadBlob(c, cs, mf.Config)
	if err != nil {
		t.Fatal(err)
	}
	var cfg ocispec.Image
	must(t, json.Unmarshal(b, &cfg))
	top := mf.Layers[len(mf.Layers)-1]
	if top.MediaType != ocispec.MediaTypeImageLayer {
		t.Errorf("top layer media type %s", top.MediaType)
	}
	ra, err := cs.ReaderAt(c, top)
	if err != nil {
		t.Fatal(err)
	}
	defer ra.Close()
	hdrs := map[string]*tar.Header{}
	tr := tar.NewReader(content.NewReader(ra))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		hdrs[strings.TrimSuffix(h.Name, "/")] = h
	}
	return cfg, hdrs
}

// TestCommit: a sandbox's files become an image with root's files owned
// by root and a user's by that user (in the layer itself, not only as a
// sandbox sees them), the sandbox's env and workdir in the config and the
// message in the history; the sandbox runs on; a sandbox made from the
// image sees the same contents, owners and modes, and the deletion.
func TestCommit(t *testing.T) {
	const ref = "committed/app:v1"
	before := storeState(t)
	id := newSandbox(t, "--env", "MODE=committed", "--workdir", "/data")
	sh(t, id, `set -e
		mkdir -p /data/udir
		echo root-secret > /data/root.txt && chmod 0640 /data/root.txt
		echo user-file > /data/user.txt && chown 1000:1001 /data/user.txt && chmod 0604 /data/user.txt
		chown 1000:1000 /data/udir && chmod 0750 /data/udir
		printf '#!/bin/sh\necho run\n' > /data/udir/tool && chown 1000:1000 /data/udir/tool && chmod 4755 /data/udir/tool
		echo changed >> /etc/hostname
		rm /bin/vi
		ln -s /data/root.txt /data/link`)
	out, err := boxctl(nil, "commit", "--message", "first commit", id, ref)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, ref+"\tsha256:") {
		t.Fatalf("commit printed %q", out)
	}
	if got := sh(t, id, "echo still running; cat /data/root.txt"); got != "still running\nroot-secret\n" {
		t.Errorf("source after commit: %q", got)
	}
	if st := inspect(t, id).State; st != "running" {
		t.Errorf("source state after commit = %s", st)
	}

	cfg, hdrs := committedImage(t, ref)
	for name, want := range map[string][2]int{
		"data/root.txt": {0, 0}, "data/user.txt": {1000, 1001}, "data/udir": {1000, 1000},
		"data/udir/tool": {1000, 1000}, "data": {0, 0}, "etc/hostname": {0, 0},
	} {
		h := hdrs[name]
		if h == nil {
			t.Errorf("layer has no %s (entries %v)", name, keys(hdrs))
			continue
		}
		if h.Uid != want[0] || h.Gid != want[1] {
			t.Errorf("layer: %s owned %d:%d, want %d:%d", name, h.Uid, h.Gid, want[0], want[1])
		}
	}
	if h := hdrs["bin/.wh.vi"]; h == nil {
		t.Errorf("layer has no whiteout for the removed /bin/vi")
	}
	if !slices.Contains(cfg.Config.Env, "MODE=committed") || cfg.Config.WorkingDir != "/data" {
		t.Errorf("config env %v workdir %q", cfg.Config.Env, cfg.Config.WorkingDir)
	}
	if n := len(cfg.History); n == 0 || cfg.History[n-1].Comment != "first commit" {
		t.Errorf("history %+v", cfg.History)
	}
	if len(cfg.RootFS.DiffIDs) != 2 {
		t.Errorf("diff ids %v, want the base layer and one new one", cfg.RootFS.DiffIDs)
	}

	// A sandbox made from the image sees what the source saw.
	id2 := newSandbox(t, "--image", ref)
	got := sh(t, id2, `cd /data && stat -c '%n %u:%g %a' root.txt user.txt udir udir/tool && cat root.txt user.txt && readlink link &&
		tail -n1 /etc/hostname && (test -e /bin/vi && echo vi-present || echo vi-gone) && echo "MODE=$MODE" && udir/tool`)
	want := "root.txt 0:0 640\nuser.txt 1000:1001 604\nudir 1000:1000 750\nudir/tool 1000:1000 4755\n" +
		"root-secret\nuser-file\n/data/root.txt\nchanged\nvi-gone\nMODE=committed\nrun\n"
	if got != want {
		t.Errorf("sandbox from the committed image:\n%s\nwant:\n%s", got, want)
	}
	// The non-root user reads its own file and not root's 0640 one.
	if out, _, code := boxctlRun("exec", "-u", "1000", id2, "--", "sh", "-c", "cat /data/user.txt; cat /data/root.txt"); code == 0 || out != "user-file\n" {
		t.Errorf("as uid 1000: exit %d, %q", code, out)
	}

	// A commit of the committed sandbox stacks one more layer.
	sh(t, id2, "echo second > /data/second.txt")
	if _, err := boxctl(nil, "commit", id2, ref+"-2"); err != nil {
		t.Fatal(err)
	}
	cfg2, hdrs2 := committedImage(t, ref+"-2")
	if len(cfg2.RootFS.DiffIDs) != 3 || hdrs2["data/second.txt"] == nil || hdrs2["data/root.txt"] != nil {
		t.Errorf("second commit: %d layers, top entries %v", len(cfg2.RootFS.DiffIDs), keys(hdrs2))
	}
	for _, sb := range []string{id2} {
		if _, err := boxctl(nil, "rm", "-f", sb); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range []string{ref, ref + "-2"} {
		if _, err := boxctl(nil, "image", "rm", r); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := boxctl(nil, "rm", "-f", id); err != nil {
		t.Fatal(err)
	}
	if after := storeState(t); after != before {
		t.Errorf("commit left things behind:\nbefore %s\nafter  %s", before, after)
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestCommitBadInput: each refusal names what was wrong and changes
// nothing in containerd.
func TestCommitBadInput(t *testing.T) {
	id := newSandbox(t)
	sh(t, id, "echo x > /root/x")
	if _, err := boxctl(nil, "commit", id, "bad/exists:v1"); err != nil {
		t.Fatal(err)
	}
	defer boxctl(nil, "image", "rm", "bad/exists:v1")
	before := storeState(t)
	for _, tc := range []struct {
		args       []string
		code, want string
	}{
		{[]string{"commit", "nosuchsandbox", "bad/x:v1"}, "not_found", `sandbox "nosuchsandbox" not found`},
		{[]string{"commit", id, "Bad Ref!"}, "invalid_argument", "ref: "},
		{[]string{"commit", id, ""}, "invalid_argument", "ref: "},
		{[]string{"commit", id, "bad/exists:v1"}, "already_exists", `image "bad/exists:v1" already exists`},
		{[]string{"commit", "--message", strings.Repeat("m", 5000), id, "bad/y:v1"}, "invalid_argument", "message: "},
	} {
		_, stderr, code := boxctlRun(tc.args...)
		if code == 0 || !strings.Contains(stderr, tc.code) || !strings.Contains(stderr, tc.want) {
			t.Errorf("boxctl %v: exit %d, %q; want %s naming %q", tc.args[:len(tc.args)-1], code, stderr, tc.code, tc.want)
		}
	}
	if after := storeState(t); after != before {
		t.Errorf("refused commits changed the store:\nbefore %s\nafter  %s", before, after)
	}
	// With --force the name moves to the new image.
	sh(t, id, "echo y > /root/y")
	if _, err := boxctl(nil, "commit", "--force", id, "bad/exists:v1"); err != nil {
		t.Fatal(err)
	}
	_, hdrs := committedImage(t, "bad/exists:v1")
	if hdrs["root/y"] == nil {
		t.Errorf("forced commit did not replace the image: %v", keys(hdrs))
	}
}

// TestFork: five forks each start with the source's files and settings,
// and from then on nobody sees anybody else's writes; the source runs on;
// each fork is deleted on its own, and once all are gone nothing of them
// is left in containerd.
func TestFork(t *testing.T) {
	src := newSandbox(t, "--memory", "96m", "--pids", "64", "--env", "K=source", "--label", "team=a", "--workdir", "/w")
	sh(t, src, "mkdir -p /w && echo base > /w/base && dd if=/dev/urandom of=/w/blob bs=64k count=16 2>/dev/null && md5sum /w/blob > /w/blob.md5 && chown 1000:1000 /w/base")
	before := storeState(t)
	out, err := boxctl(nil, "fork", "-n", "5", "--label", "fork=yes", src)
	if err != nil {
		t.Fatal(err)
	}
	forks := strings.Fields(out)
	if len(forks) != 5 {
		t.Fatalf("fork printed %q, want five ids", out)
	}
	deleted := map[string]bool{}
	t.Cleanup(func() {
		for _, f := range forks {
			if !deleted[f] {
				boxctl(nil, "rm", "-f", f)
			}
		}
	})
	srcSB := inspect(t, src)
	if srcSB.State != "running" {
		t.Errorf("source state after fork = %s", srcSB.State)
	}
	for i, f := range forks {
		sb := inspect(t, f)
		if sb.MemoryBytes != 96<<20 || sb.Pids != 64 || sb.Workdir != "/w" || !slices.Contains(sb.Env, "K=source") ||
			sb.Labels["team"] != "a" || sb.Labels["fork"] != "yes" || sb.Image != srcSB.Image || sb.State != "running" {
			t.Errorf("fork %d: %+v", i, sb)
		}
		// Each fork has a uid block of its own, and still sees the
		// source's owners: the fork layer holds unshifted ids.
		if sb.Security.GetUidMap() == srcSB.Security.GetUidMap() {
			t.Errorf("fork %d shares the source's uid map %s", i, sb.Security.GetUidMap())
		}
		got := sh(t, f, "cat /w/base && md5sum -c /w/blob.md5 >/dev/null && echo ok && stat -c %u:%g /w/base && pwd")
		if got != "base\nok\n1000:1000\n/w\n" {
			t.Errorf("fork %d sees %q", i, got)
		}
		sh(t, f, fmt.Sprintf("echo %d > /w/mine && rm /w/base", i))
	}
	sh(t, src, "echo src > /w/src-only")
	for i, f := range forks {
		got := sh(t, f, "cat /w/mine; ls /w")
		if got != fmt.Sprintf("%d\nblob\nblob.md5\nmine\n", i) {
			t.Errorf("fork %d after the others wrote: %q", i, got)
		}
	}
	if got := sh(t, src, "cat /w/base; ls /w"); got != "base\nbase\nblob\nblob.md5\nsrc-only\n" {
		t.Errorf("source after the forks wrote: %q", got)
	}
	// Each fork goes on its own; the others and the source are unharmed.
	for i, f := range forks {
		if _, err := boxctl(nil, "rm", f); err != nil {
			t.Fatal(err)
		}
		deleted[f] = true
		for _, g := range forks[i+1:] {
			if got := sh(t, g, "md5sum -c /w/blob.md5 >/dev/null && echo ok"); got != "ok\n" {
				t.Errorf("fork %s after %s was deleted: %q", g, f, got)
			}
		}
	}
	if got := sh(t, src, "cat /w/src-only"); got != "src\n" {
		t.Errorf("source after the forks were deleted: %q", got)
	}
	if after := storeState(t); after != before {
		t.Errorf("forks left things behind:\nbefore %s\nafter  %s", before, after)
	}
}

// TestForkOfForkAndCommit: a fork of a fork sits on two fork layers, and a
// commit of it writes both as layers with the right owners.
func TestForkOfForkAndCommit(t *testing.T) {
	src := newSandbox(t)
	sh(t, src, "echo one > /root/one && chown 1000:1000 /root/one")
	f1 := strings.TrimSpace(mustOut(t, "fork", src))
	t.Cleanup(func() { boxctl(nil, "rm", "-f", f1) })
	sh(t, f1, "echo two > /root/two && chown 1001:1001 /root/two && rm /root/one")
	f2 := strings.TrimSpace(mustOut(t, "fork", "--name", "grandchild", f1))
	t.Cleanup(func() { boxctl(nil, "rm", "-f", f2) })
	if got := sh(t, "grandchild", "ls /root; stat -c %u /root/two"); got != "two\n1001\n" {
		t.Errorf("fork of a fork sees %q", got)
	}
	sh(t, f2, "echo three > /root/three")
	mustOut(t, "commit", f2, "forked/img:v1")
	defer boxctl(nil, "image", "rm", "forked/img:v1")
	cfg, _ := committedImage(t, "forked/img:v1")
	if len(cfg.RootFS.DiffIDs) != 4 {
		t.Errorf("commit of a fork of a fork: %d layers, want base + 2 fork layers + its own", len(cfg.RootFS.DiffIDs))
	}
	id := newSandbox(t, "--image", "forked/img:v1")
	if got := sh(t, id, "ls /root; stat -c %u:%g /root/two"); got != "three\ntwo\n1001:1001\n" {
		t.Errorf("sandbox from the committed fork sees %q", got)
	}
}

func mustOut(t *testing.T, args ...string) string {
	t.Helper()
	out, err := boxctl(nil, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestForkCommitRefused: a sandbox whose root planted something that would
// redirect runc can be neither forked nor committed; a stopped sandbox
// cannot be forked; bad fork requests name their field; none of it leaves
// anything behind.
func TestForkCommitRefused(t *testing.T) {
	id := newSandbox(t)
	ok := newSandbox(t)
	sh(t, id, "rm /etc/passwd && mkfifo /etc/passwd")
	before := storeState(t)
	for _, args := range [][]string{{"fork", id}, {"commit", id, "tampered/img:v1"}} {
		_, stderr, code := boxctlRun(args...)
		if code == 0 || !strings.Contains(stderr, "failed_precondition") || !strings.Contains(stderr, "/etc/passwd is a fifo") {
			t.Errorf("%s of a tampered sandbox: exit %d, %q", args[0], code, stderr)
		}
	}
	if st := inspect(t, id).State; st != "running" {
		t.Errorf("tampered source left %s, want running (thawed)", st)
	}
	pid := inspect(t, id).InitPid
	must(t, syscall.Kill(int(pid), syscall.SIGKILL))
	waitRefused(t, id)
	_, err := env.api.ForkSandbox(ctx(t), connect.NewRequest(&boxdv1.ForkSandboxRequest{SandboxId: id}))
	if connect.CodeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), "is stopped") {
		t.Errorf("fork of a stopped sandbox: %v", err)
	}

	for _, tc := range []struct {
		req  *boxdv1.ForkSandboxRequest
		code connect.Code
		want string
	}{
		{&boxdv1.ForkSandboxRequest{SandboxId: "nosuch"}, connect.CodeNotFound, `sandbox "nosuch" not found`},
		{&boxdv1.ForkSandboxRequest{SandboxId: ok, Count: 65}, connect.CodeInvalidArgument, "count: 65"},
		{&boxdv1.ForkSandboxRequest{SandboxId: ok, Count: 2, Names: []string{"a"}}, connect.CodeInvalidArgument, "names: 1 names for 2 forks"},
		{&boxdv1.ForkSandboxRequest{SandboxId: ok, Names: []string{"dup", "dup"}}, connect.CodeInvalidArgument, `names: "dup" is given twice`},
		{&boxdv1.ForkSandboxRequest{SandboxId: ok, Names: []string{"bad name"}}, connect.CodeInvalidArgument, "names[0]"},
		{&boxdv1.ForkSandboxRequest{SandboxId: ok, Limits: &boxdv1.Limits{Memory: "1k"}}, connect.CodeInvalidArgument, "limits.memory"},
		{&boxdv1.ForkSandboxRequest{SandboxId: ok, Env: []string{"1X=y"}}, connect.CodeInvalidArgument, "env: "},
	} {
		_, err := env.api.ForkSandbox(ctx(t), connect.NewRequest(tc.req))
		if connect.CodeOf(err) != tc.code || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("fork %+v: %v, want %s naming %q", tc.req, err, tc.code, tc.want)
		}
	}
	if after := storeState(t); after != before {
		t.Errorf("refused forks and commits changed the store:\nbefore %s\nafter  %s", before, after)
	}
}

// TestFrozenSandboxThawedAfterCrash: a boxd killed while a commit or fork
// has a sandbox frozen leaves the freeze and its mark; the reconciler
// thaws it. The state is made as a crash would leave it, straight through
// containerd.
func TestFrozenSandboxThawedAfterCrash(t *testing.T) {
	id := newSandbox(t)
	c := namespaces.WithNamespace(ctx(t), namespace)
	ctr, err := env.ctr.LoadContainer(c, id)
	if err != nil {
		t.Fatal(err)
	}
	// The pause first, then the mark: a reconciler pass between the two
	// would otherwise see a mark on a running sandbox, clear it, and leave
	// the pause that follows for good (a live commit holds the sandbox, so
	// no pass sees its mark before its pause).
	task, err := ctr.Task(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	must(t, task.Pause(c))
	if _, err := ctr.SetLabels(c, map[string]string{"boxd.io/frozen": "2026-01-01T00:00:00Z"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := task.Status(c)
		labels, lerr := ctr.Labels(c)
		if err == nil && lerr == nil && st.Status == "running" && labels["boxd.io/frozen"] == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %v (labels %v) 30 s after a left-over freeze", st.Status, labels)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := sh(t, id, "echo thawed"); got != "thawed\n" {
		t.Errorf("exec after thaw: %q", got)
	}
}

// TestFrozenMarkThawedAfterCrash: the mark a commit or fork leaves while
// it holds a sandbox frozen (a file in its state directory, beside the
// kernel's freezer state) makes the reconciler thaw it when no commit or
// fork holds it any more, as after a boxd killed mid-commit; a sandbox a
// user paused keeps its pause even with a stale mark.
func TestFrozenMarkThawedAfterCrash(t *testing.T) {
	freezerFile, frozenVal, thawedVal := "/sys/fs/cgroup/freezer/"+namespace+"/%s/freezer.state", "FROZEN", "THAWED"
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil { // v2
		freezerFile, frozenVal, thawedVal = "/sys/fs/cgroup/"+namespace+"/%s/cgroup.freeze", "1", "0"
	}
	state := func(id string) string {
		b, err := os.ReadFile(fmt.Sprintf(freezerFile, id))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	mark := func(id string) string { return filepath.Join(env.stateDir, "sandboxes", id, "frozen-by-boxd") }

	id := newSandbox(t)
	must(t, os.WriteFile(fmt.Sprintf(freezerFile, id), []byte(frozenVal), 0o644))
	must(t, os.WriteFile(mark(id), []byte("2026-01-01T00:00:00Z"), 0o600))
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := os.Stat(mark(id))
		if st := state(id); st == thawedVal && os.IsNotExist(err) {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("freezer %s, mark %v, 30 s after a left-over freeze", st, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := sh(t, id, "echo thawed"); got != "thawed\n" {
		t.Errorf("exec after thaw: %q", got)
	}

	// A user's pause with a stale mark: the mark goes, the pause stays.
	paused := newSandbox(t)
	if out, err := boxctl(nil, "pause", paused); err != nil {
		t.Fatalf("pause: %q %v", out, err)
	}
	must(t, os.WriteFile(mark(paused), []byte("2026-01-01T00:00:00Z"), 0o600))
	deadline = time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(mark(paused)); os.IsNotExist(err) {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("stale mark on a paused sandbox still there after 30 s (%v)", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st := state(paused); st != frozenVal {
		t.Errorf("a user's pause was thawed by a stale mark: freezer %s", st)
	}
}

// TestForkAndCommitCopyKinds: fork and commit copy a writable layer
// directly (not through a tar) for every kind of entry one holds, here
// from a disk-capped sandbox (its layer on a filesystem of its own, so the
// kernel cannot copy_file_range across): a sparse file stays sparse, hard
// links stay links, a deleted image file (whiteout) and a directory made
// anew over the image's (opaque) hide what is under them, and owners,
// setuid and symlinks are kept, in the fork and in a sandbox made from
// the commit.
func TestForkAndCommitCopyKinds(t *testing.T) {
	const ref = "committed/kinds:v1"
	src := newSandbox(t, "--disk", "64m")
	sh(t, src, `set -e
		mkdir -p /k && cd /k
		truncate -s 48M sparse && printf x | dd of=sparse bs=1 seek=25165824 conv=notrunc 2>/dev/null
		echo linked > a && ln a b && chown 1000:1000 a
		printf '#!/bin/sh\n' > suid && chown 1000:1001 suid && chmod 4755 suid
		ln -s /k/a sym
		rm /bin/vi
		rm -rf /usr && mkdir -p /usr/fresh`)
	const check = `cd /k
		stat -c '%s %b' sparse; dd if=sparse bs=1 skip=25165824 count=1 2>/dev/null; echo
		cat b; [ "$(stat -c %i a)" = "$(stat -c %i b)" ] && echo same-inode; stat -c %u:%g a
		stat -c '%a %u:%g' suid; readlink sym
		[ -e /bin/vi ] || echo no-vi; ls /usr`
	want := "50331648 8\nx\nlinked\nsame-inode\n1000:1000\n4755 1000:1001\n/k/a\nno-vi\nfresh\n"
	// A 4 KiB block of data: stat %b counts 512-byte blocks (8, or up to 16 with ext4's
	// allocation); anything near 48 MiB means the hole was copied.
	sparseOK := func(got string) string {
		lines := strings.SplitN(got, "\n", 2)
		var size, blocks int64
		if _, err := fmt.Sscanf(lines[0], "%d %d", &size, &blocks); err == nil && size == 48<<20 && blocks > 0 && blocks <= 64 {
			lines[0] = "50331648 8"
		}
		return strings.Join(lines, "\n")
	}
	if got := sparseOK(sh(t, src, check)); got != want {
		t.Fatalf("source: %q, want %q", got, want)
	}

	f := strings.TrimSpace(mustOut(t, "fork", src))
	t.Cleanup(func() { boxctl(nil, "rm", "-f", f) })
	if got := sparseOK(sh(t, f, check)); got != want {
		t.Errorf("fork: %q, want %q", got, want)
	}

	if _, err := boxctl(nil, "commit", src, ref); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { boxctl(nil, "image", "rm", "--force", ref) })
	c := newSandbox(t, "--image", ref)
	if got := sparseOK(sh(t, c, check)); got != want {
		t.Errorf("from the commit: %q, want %q", got, want)
	}
}
