// Package runc finds out which runc boxd's sandboxes run on and refuses
// one with a known container escape: boxd asks the binary for its version
// (`runc --version`) at start and compares it with the releases that fixed
// the escapes in Advisories.
package runc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Advisory is a runc container escape and the releases that fixed it, one
// per release line still carrying fixes at the time (a line not named got
// no fix: it is vulnerable whatever its patch level).
type Advisory struct {
	CVE     string
	Summary string
	// Fixed lists the first fixed release of each release line, oldest
	// line first.
	Fixed []string
}

// Advisories are the container escapes boxd checks for. A runc is refused
// if any of them applies to it.
var Advisories = []Advisory{
	{CVE: "CVE-2019-5736", Summary: "overwrite of the host runc binary through /proc/self/exe", Fixed: []string{"1.0.0-rc6"}},
	{CVE: "CVE-2021-30465", Summary: "mount destination symlink race: host directories mounted into the container", Fixed: []string{"1.0.0-rc95"}},
	{CVE: "CVE-2024-21626", Summary: "leaked host file descriptor as the process's working directory (\"Leaky Vessels\")", Fixed: []string{"1.1.12"}},
	{CVE: "CVE-2025-31133", Summary: "masked path abuse: /dev/null replaced by a symlink, host procfs files writable", Fixed: []string{"1.2.8", "1.3.3", "1.4.0-rc.3"}},
	{CVE: "CVE-2025-52565", Summary: "/dev/console bind-mount race: procfs files writable", Fixed: []string{"1.2.8", "1.3.3", "1.4.0-rc.3"}},
	{CVE: "CVE-2025-52881", Summary: "procfs write redirection through shared mounts (LSM labels bypassed, host sysctls writable)", Fixed: []string{"1.2.8", "1.3.3", "1.4.0-rc.3"}},
}

// Version is a runc release number: major.minor.patch with an optional
// pre-release (-rc.N, or Debian's older -rcN); build metadata (+ds1) is
// dropped.
type Version struct {
	Major, Minor, Patch int
	// RC is the release candidate number, 0 for a final release.
	RC int
	// Raw is the version as the binary printed it.
	Raw string
}

func (v Version) String() string { return v.Raw }

var versionRe = regexp.MustCompile(`^v?(\d+)\.(\d+)\.(\d+)(?:-rc\.?(\d+))?(?:[+~].*)?$`)

// ParseVersion parses a runc version such as 1.5.2, 1.4.0-rc.3, 1.0.0-rc95
// or 1.1.5+ds1.
func ParseVersion(s string) (Version, error) {
	m := versionRe.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return Version{}, fmt.Errorf("%q is not a runc release number (like 1.5.2 or 1.4.0-rc.3)", s)
	}
	n := func(s string) int {
		if s == "" {
			return 0
		}
		v, _ := strconv.Atoi(s)
		return v
	}
	return Version{Major: n(m[1]), Minor: n(m[2]), Patch: n(m[3]), RC: n(m[4]), Raw: strings.TrimSpace(s)}, nil
}

// Compare returns -1, 0 or 1 as v is older than, the same as, or newer
// than w. A release candidate is older than its final release.
func (v Version) Compare(w Version) int {
	for _, d := range []int{v.Major - w.Major, v.Minor - w.Minor, v.Patch - w.Patch} {
		if d != 0 {
			return sign(d)
		}
	}
	switch {
	case v.RC == w.RC:
		return 0
	case v.RC == 0:
		return 1
	case w.RC == 0:
		return -1
	}
	return sign(v.RC - w.RC)
}

func sign(d int) int {
	if d < 0 {
		return -1
	}
	if d > 0 {
		return 1
	}
	return 0
}

func mustParse(s string) Version {
	v, err := ParseVersion(s)
	if err != nil {
		panic(err)
	}
	return v
}

// Affects reports whether a applies to v: v is older than the fix of its
// own release line, or of a line before any fixed one, or on a line
// between fixed ones that got no fix.
func (a Advisory) Affects(v Version) bool {
	for _, f := range a.Fixed {
		fv := mustParse(f)
		if v.Major == fv.Major && v.Minor == fv.Minor {
			return v.Compare(fv) < 0
		}
	}
	// Not a line with its own fix: safe only if newer than every fix
	// (a later line, branched after the fix).
	last := mustParse(a.Fixed[len(a.Fixed)-1])
	return v.Compare(last) < 0
}

// Vulnerable lists the advisories that apply to v.
func Vulnerable(v Version) []Advisory {
	var out []Advisory
	for _, a := range Advisories {
		if a.Affects(v) {
			out = append(out, a)
		}
	}
	return out
}

// Info is the runc boxd found.
type Info struct {
	Path    string
	Version Version
	// Commit is runc's "commit:" line, if it printed one.
	Commit string
}

// Name is the runtime's name as inspect shows it.
const Name = "runc"

var versionLineRe = regexp.MustCompile(`(?m)^runc version (\S+)`)
var commitLineRe = regexp.MustCompile(`(?m)^commit: (\S+)`)

// Probe runs `path --version` (bounded by a few seconds) and parses its
// output.
func Probe(ctx context.Context, path string) (Info, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var out, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, path, "--version")
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = errors.Join(err, ctx.Err())
		}
		return Info{}, fmt.Errorf("runc %s --version: %w: %s", path, err, strings.TrimSpace(stderr.String()))
	}
	return ParseOutput(path, out.String())
}

// ParseOutput reads the output of `runc --version`.
func ParseOutput(path, out string) (Info, error) {
	m := versionLineRe.FindStringSubmatch(out)
	if m == nil {
		return Info{}, fmt.Errorf("runc %s --version printed no \"runc version X\" line: %q", path, firstLine(out))
	}
	v, err := ParseVersion(m[1])
	if err != nil {
		return Info{}, fmt.Errorf("runc %s: %w", path, err)
	}
	info := Info{Path: path, Version: v}
	if c := commitLineRe.FindStringSubmatch(out); c != nil {
		info.Commit = c[1]
	}
	return info, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// Check fails if info's runc has a known container escape, naming each
// and the releases that fix it.
func Check(info Info) error {
	vs := Vulnerable(info.Version)
	if len(vs) == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "runc %s (%s) has known container escapes:", info.Version, info.Path)
	for _, a := range vs {
		fmt.Fprintf(&b, " %s (fixed in %s);", a.CVE, strings.Join(a.Fixed, ", "))
	}
	b.WriteString(" install a fixed runc (scripts/setup.sh builds the pinned one into the deps directory) or start boxd with --allow-vulnerable-runtime")
	return errors.New(b.String())
}

// Pinned is the runc release scripts/setup.sh builds (RUNC_VERSION in
// scripts/lib.sh; a unit test keeps the two equal).
const Pinned = "v1.5.2"

// DefaultDepsDir is where scripts/setup.sh installs what it builds, unless
// BOXD_DEPS says otherwise.
const DefaultDepsDir = "/opt/boxd-deps"

// PinnedPath is where scripts/setup.sh puts the pinned runc:
// $BOXD_DEPS/runc-<Pinned>/runc.
func PinnedPath() string {
	deps := os.Getenv("BOXD_DEPS")
	if deps == "" {
		deps = DefaultDepsDir
	}
	return filepath.Join(deps, "runc-"+Pinned, "runc")
}
