//go:build linux

package e2e

import (
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/boxd-dev/boxd/internal/testenv"
)

// gitRepos makes the test's repositories under dir and returns the
// commit ids of main's two commits. good.git: v1 (hello.txt "v1", a
// symlink to /etc), then main (hello.txt "v2"), and a branch dotgit whose
// tree holds .git/hooks/post-checkout; huge.git: one 48 MiB random file.
func gitRepos(t *testing.T, dir string) (first, second string) {
	t.Helper()
	git := func(wd string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"}, args...)...)
		cmd.Dir = wd
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	src := filepath.Join(dir, "src")
	must(t, os.MkdirAll(src, 0o755))
	git(src, "init", "-q")
	must(t, os.WriteFile(filepath.Join(src, "hello.txt"), []byte("v1\n"), 0o644))
	must(t, os.Symlink("/etc", filepath.Join(src, "etc-link")))
	git(src, "add", "-A")
	git(src, "commit", "-q", "-m", "one")
	git(src, "tag", "v1")
	first = git(src, "rev-parse", "HEAD")
	must(t, os.WriteFile(filepath.Join(src, "hello.txt"), []byte("v2\n"), 0o644))
	git(src, "commit", "-q", "-am", "two")
	second = git(src, "rev-parse", "HEAD")
	// A tree git itself would never make: a .git directory with a hook.
	hook := git(src, "hash-object", "-w", "--stdin", "--path", "x") // empty blob stands in for the script
	mktree := func(entry string) string {
		cmd := exec.Command("git", "mktree")
		cmd.Dir, cmd.Stdin = src, strings.NewReader(entry+"\n")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git mktree %q: %v: %s", entry, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	hooks := mktree("100755 blob " + hook + "\tpost-checkout")
	dotgit := mktree("040000 tree " + mktree("040000 tree "+hooks+"\thooks") + "\t.git")
	c := git(src, "commit-tree", dotgit, "-m", "dotgit")
	git(src, "update-ref", "refs/heads/dotgit", c)
	git(dir, "clone", "-q", "--bare", "--no-local", src, "good.git")
	git(filepath.Join(dir, "good.git"), "fetch", "-q", src, "dotgit:dotgit")

	huge := filepath.Join(dir, "hugesrc")
	must(t, os.MkdirAll(huge, 0o755))
	git(huge, "init", "-q")
	b := make([]byte, 48<<20)
	_, _ = rand.Read(b)
	must(t, os.WriteFile(filepath.Join(huge, "big.bin"), b, 0o644))
	git(huge, "add", "-A")
	git(huge, "commit", "-q", "-m", "big")
	git(dir, "clone", "-q", "--bare", "--no-local", huge, "huge.git")
	return first, second
}

// serveGit runs git daemon in the test host H1 (git://198.18.0.2/NAME).
func serveGit(t *testing.T, e *egressNet, dir string) {
	t.Helper()
	cmd := exec.Command("ip", "netns", "exec", e.h1, "git", "daemon", "--reuseaddr", "--export-all",
		"--base-path="+dir, "--listen="+h1Addr, "--port=9418", dir)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	must(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _, _ = cmd.Process.Wait() })
	for i := 0; ; i++ {
		if exec.Command("ip", "netns", "exec", e.h1, "git", "ls-remote", "git://"+h1Addr+"/good.git").Run() == nil {
			return
		}
		if i == 100 {
			t.Fatal("git daemon did not answer")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestCreateGit: create --git checks a repository out into /workspace
// inside the sandbox, under its egress policy; what boxd refuses before
// git runs, and what a hostile repository gets.
func TestCreateGit(t *testing.T) {
	e := newEgressNet(t)
	e.start(t)
	t.Cleanup(func() { e.stop(t, syscall.SIGTERM) })
	e.must(t, "image", "import", "--rootfs", env.busybox, "--name", testImage)
	tarPath, err := testenv.DebianImage()
	must(t, err)
	e.must(t, "image", "import", tarPath, "--name", debianImage)
	repos := t.TempDir()
	first, _ := gitRepos(t, repos)
	serveGit(t, e, repos)
	good := "git://" + h1Addr + "/good.git"
	create := func(args ...string) (string, string, int) {
		base := []string{"create", "--image", debianImage, "--memory", "256m", "--network", "egress", "--allow", h1Addr + "/32:9418"}
		out, stderr, code := e.boxctl(append(base, args...)...)
		if code == 0 {
			id := strings.TrimSpace(out)
			t.Cleanup(func() { _, _, _ = e.boxctl("rm", "-f", id) })
			return id, stderr, code
		}
		return out, stderr, code
	}

	t.Run("Clone", func(t *testing.T) {
		// The clone runs as the sandbox's user, who owns /workspace here.
		id, stderr, code := create("--user", "sandbox", "--git", good)
		if code != 0 {
			t.Fatalf("create --git: %s", stderr)
		}
		if got := e.must(t, "exec", id, "--", "cat", "/workspace/hello.txt"); got != "v2" {
			t.Errorf("hello.txt = %q, want v2 (main)", got)
		}
		// The symlink is the sandbox's own: it points at the sandbox's /etc.
		if got := e.must(t, "exec", id, "--", "readlink", "/workspace/etc-link"); got != "/etc" {
			t.Errorf("etc-link -> %q", got)
		}
		// Owned by the sandbox's user, who goes on with git there.
		if got := e.must(t, "exec", id, "--", "stat", "-c", "%u", "/workspace/hello.txt", "/workspace/.git/HEAD"); got != "1000\n1000" {
			t.Errorf("owners %q, want 1000", got)
		}
		if got := e.must(t, "exec", id, "--", "git", "-C", "/workspace", "log", "--format=%s"); got != "two\none" {
			t.Errorf("git log = %q", got)
		}
		// No hook of any kind was installed by the clone.
		if got := e.must(t, "exec", id, "--", "sh", "-c", "ls /workspace/.git/hooks | grep -v sample || true"); got != "" {
			t.Errorf("hooks in the clone: %q", got)
		}
	})
	t.Run("RefDepthSHA", func(t *testing.T) {
		id, stderr, code := create("--user", "sandbox", "--git", good+"#v1", "--git-depth", "1")
		if code != 0 {
			t.Fatalf("create --git #v1: %s", stderr)
		}
		if got := e.must(t, "exec", id, "--", "cat", "/workspace/hello.txt"); got != "v1" {
			t.Errorf("hello.txt at v1 = %q", got)
		}
		if got := e.must(t, "exec", id, "--", "git", "-C", "/workspace", "rev-list", "--count", "HEAD"); got != "1" {
			t.Errorf("depth 1: %s commits", got)
		}
		id, stderr, code = create("--user", "sandbox", "--git", good+"#"+first)
		if code != 0 {
			t.Fatalf("create --git #SHA: %s", stderr)
		}
		if got := e.must(t, "exec", id, "--", "git", "-C", "/workspace", "rev-parse", "HEAD"); got != first {
			t.Errorf("HEAD = %s, want %s", got, first)
		}
	})
	t.Run("IntoVolume", func(t *testing.T) {
		e.must(t, "volume", "create", "ws", "--size", "64m")
		t.Cleanup(func() { _, _, _ = e.boxctl("volume", "rm", "--force", "ws") })
		id, stderr, code := create("--volume", "ws:/workspace", "--git", good)
		if code != 0 {
			t.Fatalf("create --git into a volume: %s", stderr)
		}
		e.must(t, "rm", "-f", id)
		id = e.must(t, "create", "--volume", "ws:/w:ro")
		t.Cleanup(func() { _, _, _ = e.boxctl("rm", "-f", id) })
		if got := e.must(t, "exec", id, "--", "cat", "/w/hello.txt"); got != "v2" {
			t.Errorf("the volume's hello.txt = %q", got)
		}
	})
	t.Run("Refused", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			want string
		}{
			// A transport that runs a command is never handed to git.
			{[]string{"--git", "ext::sh -c touch% /tmp/boxd-git-pwned"}, "invalid_argument"},
			{[]string{"--git", "file:///etc"}, "invalid_argument"},
			{[]string{"--git", "git://user:secret@" + h1Addr + "/good.git"}, "invalid_argument"},
			{[]string{"--git", good + "#--upload-pack=touch /tmp/boxd-git-pwned"}, "invalid_argument"},
			{[]string{"--git-depth", "1"}, "invalid_argument"},
			// The clone obeys the sandbox's network: none at all, or an
			// allowlist without H1's git port.
			{[]string{"--network", "none", "--git", good}, "invalid_argument"},
			{[]string{"--network", "egress", "--allow", h2Addr + "/32:9418", "--git", good, "--name", "gitdenied"}, "failed_precondition"},
			// The image has no git.
			{[]string{"--image", testImage, "--git", good, "--name", "gitnogit"}, "failed_precondition"},
			// A tree with a .git directory is refused as it arrives.
			{[]string{"--git", good + "#dotgit", "--name", "gitdotgit"}, "failed_precondition"},
			// A repository bigger than the sandbox's disk cap.
			{[]string{"--disk", "32m", "--git", "git://" + h1Addr + "/huge.git", "--name", "githuge"}, "failed_precondition"},
		} {
			var out, stderr string
			var code int
			if tc.args[0] == "--network" {
				out, stderr, code = e.boxctl(append([]string{"create", "--image", debianImage, "--memory", "256m"}, tc.args...)...)
			} else {
				out, stderr, code = create(tc.args...)
			}
			checkRefused(t, e, tc.args, out, stderr, code, tc.want)
			t.Logf("create %q: %s", tc.args, strings.TrimSpace(stderr))
		}
		if _, err := os.Stat("/tmp/boxd-git-pwned"); err == nil {
			t.Error("/tmp/boxd-git-pwned exists on the host")
		}
	})
}

func checkRefused(t *testing.T, e *egressNet, args []string, out, stderr string, code int, want string) {
	t.Helper()
	if code == 0 {
		t.Errorf("create %q succeeded: %s", args, out)
		return
	}
	if !strings.Contains(stderr, want) || !strings.Contains(stderr, "git") {
		t.Errorf("create %q: %s, want %s naming git", args, stderr, want)
	}
	if strings.Contains(stderr, "secret") {
		t.Errorf("create %q: the error shows the password: %s", args, stderr)
	}
	for _, a := range args {
		if strings.HasPrefix(a, "git") && !strings.Contains(a, "/") {
			if _, _, code := e.boxctl("inspect", a); code == 0 {
				t.Errorf("create %q failed but sandbox %s is left", args, a)
			}
		}
	}
}
