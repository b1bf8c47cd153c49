//go:build linux

// Package testenv sets up what boxd's integration tests need: a private
// containerd at the version go.mod pins, the boxd binaries, and root
// filesystems built from images/.
//
// It runs the repository's scripts rather than duplicating them:
// scripts/setup.sh installs dependencies, scripts/containerd.sh starts and
// stops the daemon, images/*/build.sh build root filesystems.
//
// Typical use:
//
//	func TestMain(m *testing.M) {
//		if skip, err := testenv.Require(); err != nil {
//			fmt.Fprintln(os.Stderr, err)
//			os.Exit(1)
//		} else if skip {
//			os.Exit(0)
//		}
//		ctrd, err := testenv.StartContainerd()
//		...
//		code := m.Run()
//		ctrd.Stop()
//		os.Exit(code)
//	}
package testenv

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/boxd-dev/boxd/internal/gvisor"
	"github.com/boxd-dev/boxd/internal/runc"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Runc is the runc binary the private containerd's shims use: the pinned
// one scripts/setup.sh builds (boxd's default). containerd 2.2 has no
// daemon-side setting for it outside CRI: clients should pass it as
// options.Options.BinaryName.
var Runc = runc.PinnedPath()

// Runsc is gVisor's runsc (with containerd-shim-runsc-v1 next to it) that
// scripts/setup.sh builds: boxd's default --runsc, so the e2e boxd offers
// --runtime gvisor.
var Runsc = gvisor.PinnedPath()

// dirPrefix names the temporary directories StartContainerd creates, so that
// directories left by crashed test binaries can be found and cleaned.
const dirPrefix = "boxd-ctrd-"

// Containerd is a private containerd started for a test binary.
type Containerd struct {
	// Address is the gRPC socket (for client.New).
	Address string
	// Dir holds everything of this daemon: config.toml, root, state,
	// containerd.log, the socket. Stop removes it.
	Dir string
	// Ctr is the path of the ctr binary matching the daemon.
	Ctr string
	// Version is the containerd version go.mod pins (e.g. "v2.2.9").
	Version string
	// BinDir holds containerd, containerd-shim-runc-v2 and ctr.
	BinDir string
	// Log is the daemon's log file (shim logs go there too).
	Log string

	stopOnce sync.Once
	stopErr  error
}

var (
	repoRootOnce sync.Once
	repoRoot     string
)

// RepoRoot returns the root of the boxd repository (the directory holding
// go.mod). It is found from this package's source location or, if that is
// not available (a -trimpath build), by walking up from the working
// directory. It panics if neither works.
func RepoRoot() string {
	repoRootOnce.Do(func() {
		if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
			dir := filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
			if isRepoRoot(dir) {
				repoRoot = dir
				return
			}
		}
		if wd, err := os.Getwd(); err == nil {
			for dir := wd; ; dir = filepath.Dir(dir) {
				if isRepoRoot(dir) {
					repoRoot = dir
					return
				}
				if dir == filepath.Dir(dir) {
					break
				}
			}
		}
	})
	if repoRoot == "" {
		panic("testenv: cannot find the boxd repository root (go.mod of github.com/boxd-dev/boxd)")
	}
	return repoRoot
}

func isRepoRoot(dir string) bool {
	data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" {
			return f[1] == "github.com/boxd-dev/boxd"
		}
	}
	return false
}

// Require is meant for TestMain of integration tests. They need root: when
// not root it returns an error in CI (env CI=true: the test binary must
// fail rather than pass without testing anything); on a developer machine it
// prints "SKIP integration: needs root (...)" and returns skip=true.
func Require() (skip bool, err error) {
	if runtime.GOOS != "linux" {
		return false, errors.New("integration tests need linux")
	}
	if os.Geteuid() == 0 {
		return false, nil
	}
	if inCI() {
		return false, fmt.Errorf("integration tests need root (euid %d) and CI=%s: run them with sudo", os.Geteuid(), os.Getenv("CI"))
	}
	fmt.Printf("SKIP integration: needs root (euid %d; run with sudo, e.g. sudo -E go test ./...)\n", os.Geteuid())
	return true, nil
}

func inCI() bool {
	v, err := strconv.ParseBool(os.Getenv("CI"))
	return err == nil && v
}

// deps are what scripts/setup.sh reports (NAME=PATH lines).
type deps map[string]string

var (
	depsMu    sync.Mutex
	depsCache deps
)

// ensureDeps runs `scripts/setup.sh --check` and, if something is missing,
// the full `scripts/setup.sh` (which may build containerd: minutes).
func ensureDeps() (deps, error) {
	depsMu.Lock()
	defer depsMu.Unlock()
	if depsCache != nil {
		return depsCache, nil
	}
	script := filepath.Join(RepoRoot(), "scripts", "setup.sh")
	out, err := runScript(script, "--check")
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: dependencies missing, running %s (building containerd takes a few minutes the first time)\n", script)
		cmd := exec.Command(script)
		cmd.Dir = RepoRoot()
		var stdout bytes.Buffer
		cmd.Stdout = &stdout
		cmd.Stderr = os.Stderr // progress and errors, as they happen
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("%s: %w", script, err)
		}
		out = stdout.String()
	}
	d := deps{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			d[k] = v
		}
	}
	for _, k := range []string{"containerd", "ctr", "containerd-shim-runc-v2", "containerd-version", "runsc", "containerd-shim-runsc-v1"} {
		if d[k] == "" {
			return nil, fmt.Errorf("%s did not report %s; output:\n%s", script, k, out)
		}
	}
	depsCache = d
	return d, nil
}

// runScript runs a script from the repository root and returns its stdout;
// on failure the error includes stderr.
func runScript(script string, args ...string) (string, error) {
	return runScriptEnv(nil, script, args...)
}

func runScriptEnv(env []string, script string, args ...string) (string, error) {
	cmd := exec.Command(script, args...)
	cmd.Dir = RepoRoot()
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w\n%s%s", script, strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// StartContainerd makes sure the pinned containerd exists (runs
// scripts/setup.sh if not) and starts a private one under a fresh temporary
// directory with scripts/containerd.sh. Directories left by earlier test
// binaries that died without calling Stop are cleaned first.
func StartContainerd() (*Containerd, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("testenv: containerd needs root (call Require from TestMain)")
	}
	base := os.TempDir()
	// Unix socket paths are limited to 108 bytes.
	if len(base) > 60 {
		base = "/tmp"
	}
	sweepStale(base)
	dir, err := os.MkdirTemp(base, dirPrefix)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return StartContainerdIn(dir)
}

// StartContainerdIn starts a private containerd with everything under dir
// (which the caller made, e.g. on a filesystem of its own); Stop stops it
// and removes dir, Start starts it again after a crash.
func StartContainerdIn(dir string) (*Containerd, error) {
	d, err := ensureDeps()
	if err != nil {
		return nil, err
	}
	c := &Containerd{
		Address: filepath.Join(dir, "containerd.sock"),
		Dir:     dir,
		Ctr:     d["ctr"],
		Version: d["containerd-version"],
		BinDir:  filepath.Dir(d["containerd"]),
		Log:     filepath.Join(dir, "containerd.log"),
	}
	if err := c.Start(); err != nil {
		// Clean whatever a half start left behind.
		if serr := c.Stop(); serr != nil {
			err = fmt.Errorf("%w (and stop: %v)", err, serr)
		}
		return nil, err
	}
	return c, nil
}

// Start starts the daemon in Dir with `scripts/containerd.sh start` (a
// no-op while it answers): a test that killed it brings it back so.
func (c *Containerd) Start() error {
	_, err := runScriptEnv(c.env(), containerdScript(), "start", c.Dir)
	return err
}

func containerdScript() string {
	return filepath.Join(RepoRoot(), "scripts", "containerd.sh")
}

func (c *Containerd) env() []string {
	return []string{"CONTAINERD_BIN_DIR=" + c.BinDir}
}

// Stop stops the daemon with `scripts/containerd.sh stop` (which also ends
// leftover shims and container processes and unmounts everything under Dir)
// and then removes Dir. Set BOXD_KEEP_TESTENV=1 to keep Dir (logs) for
// debugging. Stop is idempotent.
func (c *Containerd) Stop() error {
	c.stopOnce.Do(func() {
		if _, err := runScriptEnv(c.env(), containerdScript(), "stop", c.Dir); err != nil {
			c.stopErr = err
			return
		}
		// Never RemoveAll across a mount point: it could delete through a
		// bind mount into the host.
		if mps, err := MountsUnder(c.Dir); err != nil {
			c.stopErr = err
			return
		} else if len(mps) > 0 {
			c.stopErr = fmt.Errorf("testenv: mounts remain under %s after stop: %v", c.Dir, mps)
			return
		}
		if os.Getenv("BOXD_KEEP_TESTENV") != "" {
			fmt.Fprintf(os.Stderr, "testenv: keeping %s\n", c.Dir)
			return
		}
		c.stopErr = os.RemoveAll(c.Dir)
	})
	return c.stopErr
}

// LogTail returns up to the last n lines of the daemon's log, for test
// failure messages.
func (c *Containerd) LogTail(n int) string {
	data, err := os.ReadFile(c.Log)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// sweepStale stops and removes daemon directories under base whose owning
// test binary is gone (it crashed or was killed before Stop).
func sweepStale(base string) {
	dirs, _ := filepath.Glob(filepath.Join(base, dirPrefix+"*"))
	for _, dir := range dirs {
		data, err := os.ReadFile(filepath.Join(dir, "owner.pid"))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil || processAlive(pid) {
			continue
		}
		c := &Containerd{Dir: dir}
		if bin, err := os.ReadFile(filepath.Join(dir, "bindir")); err == nil {
			c.BinDir = strings.TrimSpace(string(bin))
		}
		if err := c.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: cleaning stale %s: %v\n", dir, err)
		}
	}
}

// processAlive reports whether pid exists and is not a zombie.
func processAlive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(data)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// MountsUnder lists the mount points (in this process's mount namespace)
// at or below dir.
func MountsUnder(dir string) ([]string, error) {
	dir = filepath.Clean(dir)
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		mp := unescapeMountinfo(f[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	return out, nil
}

// ReleaseGvisorRoots detaches runsc's null-netns pins under dir. runsc
// bind-mounts one empty network namespace per state root (null-netns,
// shared by its sandboxes' gofers, kept on purpose for faster starts) and
// leaves it when the last sandbox goes; its own docs say to unmount it
// before removing the root, which otherwise fails with EBUSY. Stacked
// pins (concurrent first creates) are detached one by one.
func ReleaseGvisorRoots(dir string) error {
	mps, err := MountsUnder(dir)
	if err != nil {
		return err
	}
	for _, mp := range mps {
		if filepath.Base(mp) != "null-netns" {
			continue
		}
		for syscall.Unmount(mp, syscall.MNT_DETACH) == nil {
		}
	}
	return nil
}

// unescapeMountinfo undoes the octal escapes (\040 for space, ...) of
// /proc/self/mountinfo.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ProcessesUsing lists the live (non-zombie) processes whose command line
// mentions s, other than this process. Tests use it to check that nothing of
// a daemon remains after Stop.
func ProcessesUsing(s string) ([]string, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte(s)) || !processAlive(pid) {
			continue
		}
		out = append(out, fmt.Sprintf("%d %s", pid, strings.TrimSpace(string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))))
	}
	return out, nil
}

// goTool returns the go command: the one on PATH, else /usr/local/go's.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "/usr/local/go/bin/go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// BuildBinaries builds ./cmd/boxd, ./cmd/boxctl, ./cmd/boxctl-full (as
// boxctl-full, which boxctl runs from its own directory), ./cmd/boxctl-mcp
// (as boxctl-mcp, which `boxctl mcp` runs likewise) and ./cmd/boxd-init
// (the last with CGO_ENABLED=0, so it runs inside any rootfs) into dir and
// returns their paths.
func BuildBinaries(dir string) (boxd, boxctl, initBin string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", "", err
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return "", "", "", err
	}
	boxd = filepath.Join(dir, "boxd")
	boxctl = filepath.Join(dir, "boxctl")
	initBin = filepath.Join(dir, "boxd-init")
	// The Makefile's build target is the one recipe (flags, tags, static
	// init), so tests run exactly what users build.
	cmd := exec.Command("make", "-s", "-C", RepoRoot(), "build", "BIN="+dir, "GO="+goTool())
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "", "", fmt.Errorf("make build: %w\n%s", err, out)
	}
	return boxd, boxctl, initBin, nil
}

// CacheDir is where built root filesystems are kept: $BOXD_CACHE, or
// boxd-cache in the temporary directory.
func CacheDir() string {
	if d := os.Getenv("BOXD_CACHE"); d != "" {
		return d
	}
	return filepath.Join(os.TempDir(), "boxd-cache")
}

// BusyboxRootfs builds, once, the busybox root filesystem directory with
// images/busybox/build.sh and returns its path. It is cached under
// CacheDir(), keyed by the recipe and the host's busybox binary, and shared
// between test binaries (a file lock serializes builds). Treat it as read
// only: copy it, or use it as a lower layer.
func BusyboxRootfs() (string, error) {
	script := filepath.Join(RepoRoot(), "images", "busybox", "build.sh")
	key, err := busyboxKey(script)
	if err != nil {
		return "", err
	}
	cache := CacheDir()
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	out := filepath.Join(cache, "busybox-"+key)
	if fileExists(filepath.Join(out, "bin", "busybox")) {
		return out, nil
	}
	unlock, err := lockFile(filepath.Join(cache, ".busybox.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if fileExists(filepath.Join(out, "bin", "busybox")) {
		return out, nil
	}
	os.RemoveAll(out) // an empty or partial directory from a crashed build
	if _, err := runScript(script, out); err != nil {
		return "", err
	}
	return out, nil
}

// DebianImage returns the docker-archive tar of boxd's Debian image
// (images/debian/archive.sh: python3 with ipykernel, jupyter_client and
// matplotlib), which scripts/setup.sh builds once into
// $BOXD_DEPS/images, keyed by the recipe. Its tag is boxd/debian:bookworm.
func DebianImage() (string, error) {
	d, err := ensureDeps()
	if err != nil {
		return "", err
	}
	p := d["debian-image"]
	if p == "" || !fileExists(p) {
		return "", fmt.Errorf("scripts/setup.sh reported no Debian image (%q): run it as root", p)
	}
	return p, nil
}

// busyboxKey hashes the recipe and identifies the busybox binary it copies.
func busyboxKey(script string) (string, error) {
	h := sha256.New()
	f, err := os.Open(script)
	if err != nil {
		return "", err
	}
	_, err = io.Copy(h, f)
	f.Close()
	if err != nil {
		return "", err
	}
	bb := os.Getenv("BUSYBOX")
	if bb == "" {
		bb = "/bin/busybox"
	}
	if st, err := os.Stat(bb); err == nil {
		fmt.Fprintf(h, "\n%s %d %d", bb, st.Size(), st.ModTime().UnixNano())
	}
	fmt.Fprintf(h, "\nuid %d", os.Geteuid())
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// lockFile takes an exclusive flock on path, waiting up to 5 minutes.
func lockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// GrpcurlVersion is the grpcurl the tests build: a gRPC client boxd did not
// write, to show that reflection and health answer standard tools.
const GrpcurlVersion = "v1.9.4"

// Grpcurl builds, once, grpcurl at GrpcurlVersion with `go install` from
// the Go module proxy and returns its path. It is cached under CacheDir()
// (a file lock serializes builds between test binaries). A failure to build
// is an error, never a reason to skip.
func Grpcurl() (string, error) {
	cache := CacheDir()
	dir := filepath.Join(cache, "grpcurl-"+GrpcurlVersion)
	bin := filepath.Join(dir, "grpcurl")
	if fileExists(bin) {
		return bin, nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	unlock, err := lockFile(filepath.Join(cache, ".grpcurl.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if fileExists(bin) {
		return bin, nil
	}
	// Into a temporary directory first, so a killed build leaves no
	// half-written binary under the name the fast path trusts.
	tmp, err := os.MkdirTemp(cache, ".grpcurl-build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command(goTool(), "install", "github.com/fullstorydev/grpcurl/cmd/grpcurl@"+GrpcurlVersion)
	cmd.Dir = tmp // outside boxd's module: grpcurl's own go.mod decides its dependencies
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOFLAGS=-buildvcs=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building grpcurl %s with go install: %w\n%s", GrpcurlVersion, err, out)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := os.Rename(filepath.Join(tmp, "grpcurl"), bin); err != nil {
		return "", fmt.Errorf("installing grpcurl: %w", err)
	}
	return bin, nil
}

// NodeModules installs, once, the npm packages that dir's package.json and
// committed package-lock.json pin (npm ci, no install scripts) and returns
// the node_modules directory. It is cached under CacheDir(), keyed by the
// lockfile. Node and npm are the machine's (scripts/setup.sh checks them).
// A failure is an error, never a reason to skip.
func NodeModules(dir string) (string, error) {
	lock, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		return "", fmt.Errorf("%s: a committed package-lock.json is required: %w", dir, err)
	}
	pkg, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		return "", err
	}
	h := sha256.Sum256(append(append([]byte{}, pkg...), lock...))
	cache := CacheDir()
	out := filepath.Join(cache, "npm-"+hex.EncodeToString(h[:])[:16])
	mods := filepath.Join(out, "node_modules")
	done := filepath.Join(out, ".installed")
	if fileExists(done) {
		return mods, nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	unlock, err := lockFile(filepath.Join(cache, ".npm.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if fileExists(done) {
		return mods, nil
	}
	os.RemoveAll(out) // a partial install from a killed run
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", err
	}
	for name, data := range map[string][]byte{"package.json": pkg, "package-lock.json": lock} {
		if err := os.WriteFile(filepath.Join(out, name), data, 0o644); err != nil {
			return "", err
		}
	}
	cmd := exec.Command("npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund")
	cmd.Dir = out
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("npm ci for %s: %w\n%s", dir, err, b)
	}
	if err := os.WriteFile(done, nil, 0o644); err != nil {
		return "", err
	}
	return mods, nil
}
