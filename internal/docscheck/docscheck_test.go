// Package docscheck holds tests that keep the repository's documentation
// and tracked files in shape: a short README, relative links in README.md
// and docs/ that lead somewhere, and no large files committed by mistake.
// They read files and `git ls-files`; they need no root and no daemon.
package docscheck

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// maxReadmeLines keeps README.md an introduction; topics live in docs/.
const maxReadmeLines = 250

// maxTrackedSize is the largest tracked file allowed outside test corpora,
// testdata and lockfiles: anything bigger is a build output, a data dump
// or a binary that belongs elsewhere.
const maxTrackedSize = 1 << 20

// repoRoot is the repository's top directory: this package sits two levels
// below it.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatalf("repository root: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root %s has no go.mod: %v", root, err)
	}
	return root
}

func TestReadmeIsShort(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(data, []byte("\n")); n > maxReadmeLines {
		t.Errorf("README.md has %d lines, more than %d: move the topic into a page under docs/ and link it", n, maxReadmeLines)
	}
}

// exemptFromSize says whether a tracked path may exceed maxTrackedSize:
// test corpora, testdata and lockfiles are large by nature.
func exemptFromSize(path string) bool {
	base := filepath.Base(path)
	switch {
	case strings.HasPrefix(path, "testdata/"), strings.Contains(path, "/testdata/"):
		return true
	case strings.Contains(path, "/corpus/"), strings.HasPrefix(path, "corpus/"):
		return true
	case base == "go.sum", base == "package-lock.json", base == "yarn.lock", base == "pnpm-lock.yaml",
		strings.HasSuffix(base, ".lock"):
		return true
	}
	return false
}

func TestNoLargeTrackedFiles(t *testing.T) {
	root := repoRoot(t)
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files in %s: %v", root, err)
	}
	var big []string
	for _, path := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if path == "" || exemptFromSize(path) {
			continue
		}
		fi, err := os.Lstat(filepath.Join(root, path))
		if os.IsNotExist(err) {
			continue // deleted in the work tree, not yet committed
		}
		if err != nil {
			t.Fatalf("stat %s: %v", path, err)
		}
		if fi.Mode().IsRegular() && fi.Size() > maxTrackedSize {
			big = append(big, fmt.Sprintf("%s (%d bytes)", path, fi.Size()))
		}
	}
	if len(big) > 0 {
		t.Errorf("tracked files over %d bytes (not testdata, a corpus or a lockfile):\n%s", maxTrackedSize, strings.Join(big, "\n"))
	}
}

// docFiles are the pages whose links are checked: README.md and docs/*.md.
func docFiles(t *testing.T, root string) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{filepath.Join(root, "README.md")}, pages...)
}

var (
	linkRE = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	codeRE = regexp.MustCompile("`[^`]*`")
	// schemeRE matches absolute URLs (https:, mailto:, ...), which are not
	// checked: only files in the repository are.
	schemeRE = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
	// htmlAnchorRE matches explicit anchors, as the generated docs/api.md
	// writes them.
	htmlAnchorRE = regexp.MustCompile(`<a (?:id|name)="([^"]+)"`)
)

// markdownLinks returns the inline link targets of a markdown text with the
// line each is on, outside fenced code blocks and inline code.
func markdownLinks(text string) (targets []string, lines []int) {
	fenced := false
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range linkRE.FindAllStringSubmatch(codeRE.ReplaceAllString(line, ""), -1) {
			targets = append(targets, m[1])
			lines = append(lines, n)
		}
	}
	return targets, lines
}

// anchors returns the anchors GitHub gives the headings of a markdown text
// (lower case, punctuation dropped, spaces as hyphens, "-1", "-2" for
// repeats) and the explicit <a id> anchors.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range htmlAnchorRE.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
		if !strings.HasPrefix(line, "#") {
			continue
		}
		slug := slugify(strings.TrimLeft(line, "#"))
		if k := seen[slug]; k > 0 {
			out[fmt.Sprintf("%s-%d", slug, k)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

func slugify(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestDocLinksResolve(t *testing.T) {
	root := repoRoot(t)
	anchorCache := map[string]map[string]bool{}
	anchorsOf := func(path string) (map[string]bool, error) {
		if a, ok := anchorCache[path]; ok {
			return a, nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		anchorCache[path] = anchors(string(data))
		return anchorCache[path], nil
	}
	for _, page := range docFiles(t, root) {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, page)
		targets, lines := markdownLinks(string(data))
		for i, target := range targets {
			if schemeRE.MatchString(target) {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			dest := page
			if file != "" {
				dest = filepath.Join(filepath.Dir(page), filepath.FromSlash(file))
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s:%d: link %q: %s does not exist", rel, lines[i], target, file)
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(dest, ".md") {
				continue
			}
			a, err := anchorsOf(dest)
			if err != nil {
				t.Errorf("%s:%d: link %q: %v", rel, lines[i], target, err)
				continue
			}
			if !a[anchor] {
				t.Errorf("%s:%d: link %q: no heading gives the anchor #%s", rel, lines[i], target, anchor)
			}
		}
	}
}

// TestSlugify pins the anchor rules the link check relies on.
func TestSlugify(t *testing.T) {
	for heading, want := range map[string]string{
		" Registries (pull and push)":   "registries-pull-and-push",
		" The init's channel":           "the-inits-channel",
		" The SDKs' HTTP/1.1 paths":     "the-sdks-http11-paths",
		" rpc/lite: boxctl's front":     "rpclite-boxctls-front",
		" Stop, start, graceful delete": "stop-start-graceful-delete",
	} {
		if got := slugify(heading); got != want {
			t.Errorf("slugify(%q) = %q, want %q", heading, got, want)
		}
	}
}

// TestLinkCheckCatchesBrokenLinks makes sure the check above fails where it
// should: a missing file, a missing anchor, and links in code are skipped.
func TestLinkCheckCatchesBrokenLinks(t *testing.T) {
	text := "# Title\n\n<a id=\"pin\"></a>\nSee [a](#title), [b](#nope), `[c](missing.md)`.\n```\n[d](gone.md)\n```\n[e](x.md#y \"t\")\n"
	targets, _ := markdownLinks(text)
	if strings.Join(targets, ",") != "#title,#nope,x.md#y" {
		t.Fatalf("links found: %q", targets)
	}
	a := anchors(text)
	if !a["title"] || !a["pin"] || a["nope"] {
		t.Fatalf("anchors: %v", a)
	}
}

// TestNoOutsideReferences fails on a tracked file that points at the
// directory beside the repository (a path only its authors' machines
// have). The needle is built so this file does not match itself.
func TestNoOutsideReferences(t *testing.T) {
	root := repoRoot(t)
	needle := []byte(".." + "/shared")
	cmd := exec.Command("git", "grep", "-l", "-I", "-F", string(needle))
	cmd.Dir = root
	out, err := cmd.Output()
	if err == nil {
		t.Errorf("tracked files refer to %s, outside the repository:\n%s", needle, out)
		return
	}
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("git grep in %s: %v", root, err) // 1 is "no match"; anything else is a failure to search
	}
}
