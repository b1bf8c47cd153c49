//go:build linux

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/boxd-dev/boxd/internal/rpcclient"
	"github.com/boxd-dev/boxd/internal/testenv"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// docsBudget is how long all the pages' blocks may take together.
const docsBudget = 5 * time.Minute

// noRun marks the sh block on the next line as one a test cannot run.
var noRun = regexp.MustCompile(`^<!-- no-run: (\S.*\S) -->$`)

// docBlock is one sh block of a page: its text and the line of its first
// command.
type docBlock struct {
	line int
	text string
}

// docPages are the pages whose sh blocks run, README.md first: its first
// session imports the default image the way a new user does.
func docPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(pages)
	return append([]string{filepath.Join(testenv.RepoRoot(), "README.md")}, pages...)
}

// shBlocks returns a page's sh blocks that run, and fails on a block in
// another shell's fence (which the rule would miss) or a no-run mark that
// marks no sh block or gives no reason.
func shBlocks(t *testing.T, page string) []docBlock {
	t.Helper()
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	var blocks []docBlock
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		next := ""
		if i+1 < len(lines) {
			next = lines[i+1]
		}
		switch {
		case strings.HasPrefix(line, "<!-- no-run") && (!noRun.MatchString(line) || next != "```sh"):
			t.Errorf("%s:%d: %q marks no ```sh block on the next line, or gives no reason", page, i+1, line)
		case slices.Contains([]string{"```bash", "```shell", "```console", "```sh-session"}, line):
			t.Errorf("%s:%d: a shell block is fenced ```sh, so that it runs", page, i+1)
		case strings.HasPrefix(line, "```") && line != "```sh":
			for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
			}
		case line == "```sh":
			fence, blk := i, docBlock{line: i + 2}
			for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
				blk.text += lines[i] + "\n"
			}
			if fence == 0 || !noRun.MatchString(lines[fence-1]) {
				blocks = append(blocks, blk)
			}
		}
	}
	return blocks
}

// TestDocs runs every sh block of README.md and docs/*.md that is not
// marked <!-- no-run: reason -->, against a boxd of its own, the way a
// reader pastes them: a page's blocks in order in one bash (set -e, so
// any failing command fails its block), boxctl on PATH, the socket in
// BOXD_SOCKET, the working directory a scratch one holding the clone's
// images/ and scripts/, and /var/tmp a tmpfs of the page's own. After
// each page its sandboxes and the images it added are removed.
func TestDocs(t *testing.T) {
	start := time.Now()
	d := startBoxd(t, namespace+"-docs", false)
	t.Cleanup(func() { detachVolumes(t, d) })
	for _, page := range docPages(t) {
		blocks := shBlocks(t, page)
		if len(blocks) == 0 {
			continue
		}
		rel, _ := filepath.Rel(testenv.RepoRoot(), page)
		t.Run(rel, func(t *testing.T) {
			if rel != "README.md" {
				docsImage(t, d)
			}
			c, cancel := context.WithDeadline(context.Background(), start.Add(docsBudget))
			defer cancel()
			defer docsCleanup(t, d)
			runPage(t, c, d, rel, blocks)
		})
	}
	took := time.Since(start)
	t.Logf("the docs' blocks ran in %s", took.Round(time.Second))
	if took > docsBudget {
		t.Errorf("the docs' blocks took %s, more than %s", took, docsBudget)
	}
}

// runPage runs blocks in one bash and fails with the page, line and
// output of the first block that fails.
func runPage(t *testing.T, c context.Context, d *daemon, page string, blocks []docBlock) {
	dir := t.TempDir()
	for _, sub := range []string{"images", "scripts"} {
		if err := os.Symlink(filepath.Join(testenv.RepoRoot(), sub), filepath.Join(dir, sub)); err != nil {
			t.Fatal(err)
		}
	}
	var script strings.Builder
	script.WriteString("set -eo pipefail\n")
	for i, b := range blocks {
		fmt.Fprintf(&script, "printf '\\n@@docs-block %d\\n'\n%s", i, b.text)
	}
	script.WriteString("printf '\\n@@docs-done\\n'\n")
	file := filepath.Join(t.TempDir(), "page.sh")
	if err := os.WriteFile(file, []byte(script.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	// A mount namespace of its own: /var/tmp, where the pages build root
	// filesystems, is a fresh tmpfs and goes away with the shell.
	cmd := exec.CommandContext(c, "unshare", "--mount", "--propagation", "private", "--",
		"bash", "-c", `mount -t tmpfs -o mode=1777 docs-tmp /var/tmp && exec bash "$0"`, file)
	// grpcurl, which the clients page uses, is the one the harness builds.
	grpcurl, err := testenv.Grpcurl()
	if err != nil {
		t.Fatalf("grpcurl: %v", err)
	}
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(env.boxctl)+":"+filepath.Dir(grpcurl)+":"+os.Getenv("PATH"),
		"BOXD_SOCKET="+d.sock, "HOME="+dir)
	cmd.WaitDelay = 5 * time.Second
	outb, err := cmd.CombinedOutput()
	out := string(outb)
	t.Logf("%s: output of its blocks:\n%s", page, out)
	if err == nil && strings.HasSuffix(out, "\n@@docs-done\n") {
		return
	}
	k, rest := 0, out
	for i := range blocks {
		if j := strings.LastIndex(out, fmt.Sprintf("\n@@docs-block %d\n", i)); j >= 0 {
			k, rest = i, out[j+len(fmt.Sprintf("\n@@docs-block %d\n", i)):]
		}
	}
	if c.Err() != nil {
		err = fmt.Errorf("%w (the docs' %s budget is spent)", err, docsBudget)
	}
	t.Errorf("%s:%d: block failed: %v\n--- block\n%s--- output\n%s", page, blocks[k].line, err, blocks[k].text, rest)
}

// docsImage imports the default image when a page needs it and it is
// missing, as the demo does.
func docsImage(t *testing.T, d *daemon) {
	if slices.Contains(docsImages(t, d), testImage) {
		return
	}
	if _, stderr, code := d.boxctl("image", "import", "--rootfs", env.busybox, "--name", testImage); code != 0 {
		t.Fatalf("import %s: %s", testImage, stderr)
	}
}

func docsImages(t *testing.T, d *daemon) []string {
	resp, err := rpcclient.New(d.sock).ListImages(d.c, connect.NewRequest(&boxdv1.ListImagesRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, im := range resp.Msg.Images {
		names = append(names, im.Name)
	}
	return names
}

// docsCleanup removes every sandbox and volume, and every image but the
// default one, that a page left.
func docsCleanup(t *testing.T, d *daemon) {
	resp, err := d.api.ListSandboxes(d.c, connect.NewRequest(&boxdv1.ListSandboxesRequest{All: true}))
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range resp.Msg.Sandboxes {
		// A sandbox boxctl run left is being deleted already.
		if _, stderr, code := d.boxctl("rm", "-f", sb.Id); code != 0 && !strings.Contains(stderr, "not found") {
			t.Errorf("rm %s: %s", sb.Id, stderr)
		}
	}
	vols, err := rpcclient.NewVolumes(d.sock).ListVolumes(d.c, connect.NewRequest(&boxdv1.ListVolumesRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vols.Msg.Volumes {
		if _, stderr, code := d.boxctl("volume", "rm", "--force", v.Id); code != 0 {
			t.Errorf("volume rm %s: %s", v.Name, stderr)
		}
	}
	for _, im := range docsImages(t, d) {
		if im != testImage {
			if _, stderr, code := d.boxctl("image", "rm", "--force", im); code != 0 {
				t.Errorf("image rm %s: %s", im, stderr)
			}
		}
	}
}
