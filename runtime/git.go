//go:build linux

// Room: volumes. A repository checked out into /workspace at create
// (create --git URL[#REF]). The clone runs inside the new sandbox through
// the one exec path, with the image's git, as the sandbox's user and under
// its network policy: what the repository holds (symlinks, huge objects,
// hostile paths) lands in the sandbox's own filesystem under its disk cap,
// and nothing of it runs or is read on the host. The host only checks the
// URL and ref, so git is never handed an option, a transport that runs a
// command (ext::) or a local path, nor credentials.

package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/containerd/errdefs"

	"github.com/boxd-dev/boxd/agent/wire"
	"github.com/boxd-dev/boxd/network"
)

// GitDir is where a create's repository is checked out.
const GitDir = "/workspace"

const (
	maxGitURL   = 2048
	maxGitRef   = 255
	maxGitDepth = 1 << 20
	// gitTimeout bounds a clone, whatever the create's own deadline.
	gitTimeout = 10 * time.Minute
	// gitTail is how much of git's output a failed clone's error keeps.
	gitTail = 1024
)

var (
	gitRefRe = regexp.MustCompile(`^[A-Za-z0-9._/+-]+$`)
	gitSHARe = regexp.MustCompile(`^([0-9a-f]{40}|[0-9a-f]{64})$`)
)

// gitSource is a checked create --git.
type gitSource struct {
	url   string
	ref   string // a branch or tag; "" the remote's HEAD
	sha   string // a full commit id to check out after the clone
	depth uint32
}

// parseGit checks CreateRequest.Git ("URL[#REF]") and GitDepth against
// the resolved request; nil when the request has no repository.
func parseGit(spec string, depth uint32, r resolved) (*gitSource, error) {
	if spec == "" {
		if depth != 0 {
			return nil, fieldErr("git_depth", "needs git (a repository to clone)")
		}
		return nil, nil
	}
	raw, ref, _ := strings.Cut(spec, "#")
	if err := checkGitURL(raw); err != nil {
		return nil, err
	}
	g := &gitSource{url: raw, depth: depth}
	switch {
	case ref == "":
	case gitSHARe.MatchString(ref):
		if depth != 0 {
			return nil, fieldErr("git_depth", "a commit id (%s) cannot be checked out of a shallow clone: leave git_depth 0, or name a branch or tag", ref)
		}
		g.sha = ref
	case len(ref) > maxGitRef || !gitRefRe.MatchString(ref) || strings.HasPrefix(ref, "-") ||
		strings.Contains(ref, "..") || strings.Contains(ref, "//") || strings.HasSuffix(ref, "/") ||
		strings.HasSuffix(ref, ".lock") || strings.HasPrefix(ref, "/"):
		return nil, fieldErr("git", "ref %q must be a branch or tag name (letters, digits, . _ / + -, not starting with - or /, no ..) or a full commit id", ref)
	default:
		g.ref = ref
	}
	if depth > maxGitDepth {
		return nil, fieldErr("git_depth", "%d is above the maximum of %d", depth, maxGitDepth)
	}
	if r.network != network.ModeEgress {
		return nil, fieldErr("git", "the clone runs inside the sandbox, under its network policy: it needs network mode %q and an --allow entry for the server", network.ModeEgress)
	}
	return g, nil
}

// checkGitURL accepts an https, http or git URL with a host and no
// credentials: nothing git would take as an option, a local path or a
// transport that runs a program.
func checkGitURL(raw string) error {
	if len(raw) > maxGitURL {
		return fieldErr("git", "the URL is longer than %d bytes", maxGitURL)
	}
	for _, c := range raw {
		if c <= ' ' || c == 0x7f {
			return fieldErr("git", "the URL %q holds a space or control character", raw)
		}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fieldErr("git", "%q is not a URL: %v", raw, err)
	}
	switch u.Scheme {
	case "https", "http", "git":
	default:
		return fieldErr("git", "%q: the URL must be https://, http:// or git:// (no ssh, file, ext or local paths)", raw)
	}
	if u.User != nil {
		// The URL is not repeated: it holds a secret.
		return fieldErr("git", "credentials in the URL are not accepted (public repositories only)")
	}
	if u.Host == "" || u.Opaque != "" || strings.HasPrefix(u.Host, "-") {
		return fieldErr("git", "%q: the URL needs a host", raw)
	}
	return nil
}

// args is the clone's command line: one branch (REF's, else the remote's
// HEAD, with the tags in its history). protocol.allow keeps git to the
// URL's transports for every fetch it makes (submodules are not cloned),
// hooksPath keeps the image's template hooks from running, fsckObjects
// refuses malformed objects (paths with .git, ..) as they arrive.
func (g *gitSource) args() []string {
	a := []string{"git", "-c", "protocol.allow=never", "-c", "protocol.https.allow=always",
		"-c", "protocol.http.allow=always", "-c", "protocol.git.allow=always",
		"-c", "core.hooksPath=/dev/null", "-c", "transfer.fsckObjects=true",
		"clone", "--quiet", "--single-branch", "--no-recurse-submodules"}
	if g.depth > 0 {
		a = append(a, "--depth", fmt.Sprint(g.depth))
	}
	if g.ref != "" {
		a = append(a, "--branch", g.ref)
	}
	if g.sha != "" {
		a = append(a, "--no-checkout")
	}
	return append(a, "--", g.url, GitDir)
}

// cloneGit checks g out into the sandbox's /workspace; a failure is
// failed_precondition naming the field with the end of git's output.
func (m *Manager) cloneGit(ctx context.Context, id string, g *gitSource) error {
	env := []string{"GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=", "SSH_ASKPASS=", "GIT_CONFIG_NOSYSTEM=1"}
	if err := m.runGit(ctx, id, g.args(), env); err != nil {
		return err
	}
	if g.sha == "" {
		return nil
	}
	return m.runGit(ctx, id, []string{"git", "-c", "core.hooksPath=/dev/null", "-C", GitDir,
		"checkout", "--quiet", "--detach", g.sha, "--"}, env)
}

// runGit runs one git command in the sandbox and waits for it.
func (m *Manager) runGit(ctx context.Context, id string, args, env []string) error {
	ps, err := m.ExecProcess(ctx, id, wire.ProcessSpec{ExecRequest: wire.ExecRequest{
		Args: args, Env: env, Dir: "/", Timeout: gitTimeout, OutputLimit: 256 << 10, Combined: true}})
	if err != nil {
		if errdefs.IsNotFound(err) || strings.Contains(err.Error(), "executable file not found") {
			return fmt.Errorf("git: the image has no git to clone with (%v): %w", err, errdefs.ErrFailedPrecondition)
		}
		return fmt.Errorf("git: %w", err)
	}
	defer ps.Close()
	var tail []byte
	var res *wire.ExecResult
	for {
		ev, err := ps.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("git: %w", err)
		}
		if ev.Result != nil {
			res = ev.Result
			continue
		}
		if tail = append(tail, ev.Data...); len(tail) > gitTail {
			tail = tail[len(tail)-gitTail:]
		}
	}
	switch {
	case res == nil:
		return fmt.Errorf("git: %s: no exit status: %w", args[len(args)-1], errdefs.ErrUnknown)
	case res.ExitCode == 127:
		return fmt.Errorf("git: the image has no git to clone with: %w", errdefs.ErrFailedPrecondition)
	case res.TimedOut:
		return fmt.Errorf("git: the clone took longer than %s: %w", gitTimeout, errdefs.ErrFailedPrecondition)
	case res.ExitCode != 0 || res.Signal != "":
		return fmt.Errorf("git: %s failed (exit %d%s): %s: %w", strings.Join(args[len(args)-2:], " "), res.ExitCode,
			res.Signal, strings.TrimSpace(strings.ToValidUTF8(string(tail), "?")), errdefs.ErrFailedPrecondition)
	}
	return nil
}
