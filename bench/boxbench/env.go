//go:build linux

package main

// The benchmark's world: one private containerd (testenv, the same as
// `make test`), a boxd on it, and a private dockerd from Debian's docker.io
// on the same containerd, with the same busybox root filesystem loaded as an
// image into both. Everything lives under one temporary directory and is torn
// down at the end, also after a failure or Ctrl-C; a run that was killed
// outright is cleaned by the next one (sweepStale).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/containerd/containerd/v2/client"

	"github.com/boxd-dev/boxd/internal/rpcclient"
	"github.com/boxd-dev/boxd/internal/testenv"
)

const (
	// namespace is boxd's containerd namespace; the `ctr` peer uses it too.
	namespace = "boxd-bench"
	// dockerNamespace is dockerd's default containerd namespace.
	dockerNamespace = "moby"
	image           = "boxd/busybox:latest"
	dirPrefix       = "boxbench-"
)

type env struct {
	dir  string
	ctrd *testenv.Containerd
	cc   *client.Client // for the cleanliness checks

	boxctl, sock, stateDir string
	boxdBin, initBin       string // for the network scenario's second boxd
	boxdProc               *daemon
	boxd                   boxdAPI

	dockerDir, dockerData, dockerExec, dockerSock string
	dockerd, dockerCLI                            string
	dockerdProc                                   *daemon
	docker                                        *dockerAPI
	// Host paths dockerd 20.10 creates whatever its flags say; removed at
	// teardown if they did not exist before.
	madeKeyJSON, madeRunDocker bool

	rootfs string
	// registryAddr is where the pull scenario's registry listens; boxd
	// reaches it over plain HTTP (--insecure-registry).
	registryAddr string
	// pprofAddr is where boxd serves Go's profiler with BENCH_PROFILE
	// (profile.go); empty otherwise.
	pprofAddr string
	// baseline is the state right after set-up; the cleanliness checks
	// compare against it.
	baseline cleanState

	// keepLogs: something failed; teardown copies the daemons' logs out
	// (to logDir) before it removes their directories.
	keepLogs bool
	logDir   string

	downOnce sync.Once
	downErr  error
}

// started is when the program started; log lines carry the time since, so
// a slow phase stands out.
var started = time.Now()

func logf(format string, args ...any) {
	el := time.Since(started)
	fmt.Fprintf(os.Stderr, "boxbench %02d:%02d "+format+"\n", append([]any{int(el.Minutes()), int(el.Seconds()) % 60}, args...)...)
}

// setup builds the world. On error it tears down whatever it started.
func setup(ctx context.Context) (e *env, err error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("needs root (it starts containerd and dockerd)")
	}
	dockerd, err := exec.LookPath("dockerd")
	if err != nil {
		return nil, errors.New("dockerd not found: run bench/run.sh (make bench), which installs Debian's docker.io")
	}
	sweepStale()
	dir, err := os.MkdirTemp("/tmp", dirPrefix) // short: Unix socket paths are limited to 108 bytes
	if err != nil {
		return nil, err
	}
	e = &env{dir: dir, dockerd: dockerd}
	defer func() {
		if err != nil {
			if derr := e.teardown(); derr != nil {
				err = fmt.Errorf("%w (teardown: %v)", err, derr)
			}
		}
	}()
	if err := os.WriteFile(filepath.Join(dir, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return e, err
	}
	// The sandboxes' mapped root must be able to traverse to boxd's
	// per-sandbox state directories.
	_ = os.Chmod(dir, 0o711)

	logf("starting a private containerd")
	if e.ctrd, err = testenv.StartContainerd(); err != nil {
		return e, err
	}
	if e.cc, err = client.New(e.ctrd.Address); err != nil {
		return e, err
	}
	logf("building boxd, boxctl, boxd-init")
	boxd, boxctl, initBin, err := testenv.BuildBinaries(filepath.Join(dir, "bin"))
	if err != nil {
		return e, err
	}
	e.boxctl, e.boxdBin, e.initBin = boxctl, boxd, initBin
	if e.rootfs, err = testenv.BusyboxRootfs(); err != nil {
		return e, err
	}
	if err := e.startBoxd(ctx, boxd, initBin); err != nil {
		return e, err
	}
	if err := e.startDockerd(ctx); err != nil {
		return e, err
	}
	if e.baseline, err = e.state(ctx); err != nil {
		return e, err
	}
	return e, nil
}

// freeLoopbackAddr is a 127.0.0.1 port nothing listens on now.
func freeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func (e *env) startBoxd(ctx context.Context, boxd, initBin string) (err error) {
	e.sock = filepath.Join(e.dir, "run", "boxd.sock")
	if e.registryAddr, err = freeLoopbackAddr(); err != nil {
		return err
	}
	e.stateDir = filepath.Join(e.dir, "state")
	cmd := exec.Command(boxd, "--socket", e.sock, "--containerd", e.ctrd.Address, "--namespace", namespace,
		"--state-dir", e.stateDir, "--init-binary", initBin, "--runc", testenv.Runc, "--default-image", image,
		"--insecure-registry", e.registryAddr,
		// The ownership scenario's caller is nobody/nogroup, through both
		// sockets (scenario_owner.go).
		"--socket-group", "nogroup", "--bench-unchecked-socket", e.uncheckedSocket(),
		// No warm pool: the cold-create rows stay cold, and the pool
		// scenarios size their pools through the API (scenario_pool.go).
		"--warm-pool", "0",
		// The Docker endpoint's rows (scenario_dockerapi.go).
		"--docker-socket", e.boxdDockerSock())
	logFile, err := os.Create(filepath.Join(e.dir, "boxd.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := e.withProfiler(cmd); err != nil {
		return err
	}
	if e.boxdProc, err = startDaemon(cmd); err != nil {
		return err
	}
	_ = os.WriteFile(filepath.Join(e.dir, "boxd.pid"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
	e.boxd = boxdAPI{c: rpcclient.New(e.sock)}
	if err := waitBoxd(ctx, e.boxd, "boxd", filepath.Join(e.dir, "boxd.log")); err != nil {
		return err
	}
	logf("importing %s into boxd", image)
	if out, err := e.boxctlCmd(ctx, "image", "import", "--rootfs", e.rootfs, "--name", image).CombinedOutput(); err != nil {
		return fmt.Errorf("boxctl image import: %v %s", err, out)
	}
	return nil
}

// waitBoxd waits up to 20 s for the boxd behind api to answer; the error
// quotes the end of its log.
func waitBoxd(ctx context.Context, api boxdAPI, what, logPath string) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := api.list(ctx)
		switch {
		case err == nil:
			return nil
		case time.Now().After(deadline) || ctx.Err() != nil:
			return fmt.Errorf("%s did not answer within 20 s: %v\n%s", what, err, tail(logPath, 20))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startDockerd runs Debian's dockerd on the private containerd with every
// path under e.dir, no bridge and no iptables: it never touches the host's
// /var/lib/docker, /var/run/docker.sock or firewall.
func (e *env) startDockerd(ctx context.Context) error {
	// The CLI from the same package as dockerd (a newer docker CLI may sit
	// earlier on PATH).
	e.dockerCLI = filepath.Join(filepath.Dir(filepath.Dir(e.dockerd)), "bin", "docker")
	if _, err := os.Stat(e.dockerCLI); err != nil {
		if e.dockerCLI, err = exec.LookPath("docker"); err != nil {
			return errors.New("docker CLI not found (Debian's docker.io installs /usr/bin/docker)")
		}
	}
	e.dockerDir = filepath.Join(e.dir, "docker")
	e.dockerData = filepath.Join(e.dockerDir, "data")
	e.dockerExec = filepath.Join(e.dockerDir, "exec")
	e.dockerSock = filepath.Join(e.dockerDir, "docker.sock")
	for _, d := range []string{e.dockerData, e.dockerExec, filepath.Join(e.dockerDir, "cli")} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			return err
		}
	}
	// An empty configuration file, so the host's /etc/docker/daemon.json
	// cannot change what is measured.
	conf := filepath.Join(e.dockerDir, "daemon.json")
	if err := os.WriteFile(conf, []byte("{}\n"), 0o644); err != nil {
		return err
	}
	// dockerd 20.10 writes its trust key to /etc/docker/key.json and makes
	// /run/docker/plugins whatever the flags say; note what existed.
	e.madeKeyJSON = !exists("/etc/docker/key.json")
	e.madeRunDocker = !exists("/run/docker")
	cmd := exec.Command(e.dockerd,
		"--config-file", conf,
		"--containerd", e.ctrd.Address,
		"--data-root", e.dockerData,
		"--exec-root", e.dockerExec,
		"--pidfile", filepath.Join(e.dockerDir, "docker.pid"),
		"-H", "unix://"+e.dockerSock,
		"--bridge=none", "--iptables=false", "--ip6tables=false", "--ip-masq=false", "--userland-proxy=false",
		"--storage-driver=overlay2",
		// The runc boxd uses (the pinned one), not Debian's on PATH.
		"--add-runtime", "boxd-runc="+testenv.Runc, "--default-runtime", "boxd-runc",
		// Containers still running at shutdown get this long after SIGTERM
		// (their PID 1 is sleep, which ignores it) before SIGKILL.
		"--shutdown-timeout=2",
		"--log-level=warn")
	logFile, err := os.Create(filepath.Join(e.dockerDir, "dockerd.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	logf("starting a private dockerd (%s) on the same containerd", e.dockerd)
	if e.dockerdProc, err = startDaemon(cmd); err != nil {
		return err
	}
	e.docker = newDockerAPI(e.dockerSock, image)
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := e.docker.version(ctx); err == nil {
			break
		} else if time.Now().After(deadline) {
			return fmt.Errorf("dockerd did not answer within 60 s: %v\n%s", err, tail(logFile.Name(), 30))
		}
		select {
		case <-e.dockerdProc.exited:
			return fmt.Errorf("dockerd exited during start-up:\n%s", tail(logFile.Name(), 30))
		case <-time.After(100 * time.Millisecond):
		}
	}
	// The same root filesystem boxd imported, as a one-layer image.
	logf("importing %s into docker", image)
	tarCmd := exec.CommandContext(ctx, "tar", "-C", e.rootfs, "--numeric-owner", "-c", ".")
	imp := e.dockerCmd(ctx, "import", "-", image)
	pipe, err := tarCmd.StdoutPipe()
	if err != nil {
		return err
	}
	imp.Stdin = pipe
	var impOut bytes.Buffer
	imp.Stdout, imp.Stderr = &impOut, &impOut
	if err := tarCmd.Start(); err != nil {
		return err
	}
	ierr := imp.Run()
	terr := tarCmd.Wait()
	if ierr != nil || terr != nil {
		return fmt.Errorf("docker import: %v %v %s", ierr, terr, impOut.String())
	}
	return nil
}

// teardown stops dockerd, boxd and containerd, in that order (dockerd and
// boxd are clients of containerd), unmounts what is left under e.dir and
// removes it. It is idempotent and reports everything that went wrong.
func (e *env) teardown() error {
	e.downOnce.Do(func() { e.downErr = e.doTeardown() })
	return e.downErr
}

func (e *env) doTeardown() error {
	var errs []error
	if e.keepLogs {
		e.saveLogs()
	}
	if e.dockerdProc != nil {
		// Remove containers first so that stopping dockerd waits for none.
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		if ids, err := e.docker.list(ctx); err == nil {
			_ = removeMany(ctx, e.docker, ids, 8)
		}
		cancel()
		if err := e.dockerdProc.stop(30 * time.Second); err != nil {
			errs = append(errs, fmt.Errorf("dockerd: %w", err))
		}
	}
	if e.boxdProc != nil {
		if err := e.boxdProc.stop(15 * time.Second); err != nil {
			errs = append(errs, fmt.Errorf("boxd: %w", err))
		}
	}
	if e.cc != nil {
		_ = e.cc.Close()
	}
	if e.ctrd != nil {
		// Kills all tasks (both namespaces), leftover shims and their
		// processes, unmounts everything under its directory.
		if err := e.ctrd.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("containerd: %w", err))
		}
	}
	if e.madeKeyJSON {
		_ = os.Remove("/etc/docker/key.json")
	}
	if e.madeRunDocker {
		_ = os.Remove("/run/docker/plugins") // only if empty
		_ = os.Remove("/run/docker")
	}
	if e.dir != "" {
		if err := removeTree(e.dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// saveLogs copies boxd's, dockerd's and containerd's logs to a directory
// that outlives the run, for the report's "Problems" section.
func (e *env) saveLogs() {
	dir, err := os.MkdirTemp("/tmp", "boxbench-logs-")
	if err != nil {
		return
	}
	e.logDir = dir
	files := map[string]string{"boxd.log": filepath.Join(e.dir, "boxd.log")}
	if e.dockerDir != "" {
		files["dockerd.log"] = filepath.Join(e.dockerDir, "dockerd.log")
	}
	if e.ctrd != nil {
		files["containerd.log"] = e.ctrd.Log
	}
	for name, src := range files {
		if data, err := os.ReadFile(src); err == nil {
			_ = os.WriteFile(filepath.Join(dir, name), data, 0o644)
		}
	}
	logf("logs kept in %s", dir)
}

// daemon is a process boxbench started and must stop. One goroutine waits
// for it (a second concurrent wait could reap it from under the first).
type daemon struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

// startDaemon starts cmd in its own process group: a Ctrl-C then reaches
// only boxbench, which tears down in order (dockerd, boxd, containerd).
func startDaemon(cmd *exec.Cmd) (*daemon, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	d := &daemon{cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(d.exited) }()
	return d, nil
}

func (d *daemon) pid() int { return d.cmd.Process.Pid }

// stop sends SIGTERM, waits up to grace, then SIGKILL.
func (d *daemon) stop(grace time.Duration) error {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
		return nil
	case <-time.After(grace):
	}
	_ = d.cmd.Process.Kill()
	select {
	case <-d.exited:
		return fmt.Errorf("ignored SIGTERM for %s; killed", grace)
	case <-time.After(10 * time.Second):
		return fmt.Errorf("pid %d does not die", d.pid())
	}
}

// removeTree unmounts everything at or below dir (deepest first; dockerd
// leaves its data-root bind mount and, if killed, overlay and shm mounts)
// and removes dir, unless BENCH_KEEP is set. It never removes a directory
// that still has mounts below it.
func removeTree(dir string) error {
	mps, err := testenv.MountsUnder(dir)
	if err != nil {
		return err
	}
	sort.Slice(mps, func(i, j int) bool { return len(mps[i]) > len(mps[j]) })
	for _, mp := range mps {
		if syscall.Unmount(mp, 0) != nil {
			_ = syscall.Unmount(mp, syscall.MNT_DETACH)
		}
	}
	if left, _ := testenv.MountsUnder(dir); len(left) > 0 {
		return fmt.Errorf("mounts remain under %s: %v", dir, left)
	}
	if os.Getenv("BENCH_KEEP") != "" {
		logf("keeping %s (BENCH_KEEP)", dir)
		return nil
	}
	defer noteFreed() // the sandboxes' layers, the registry's blobs (settle.go)
	return os.RemoveAll(dir)
}

// sweepStale cleans directories of earlier runs whose boxbench died
// without tearing down (SIGKILL, a crash): it kills their dockerd and boxd
// and removes the directory. Their containerd (a testenv directory owned by
// the same dead pid) is swept by testenv.StartContainerd afterwards, which
// also ends the shims of their containers.
func sweepStale() {
	dirs, _ := filepath.Glob(filepath.Join("/tmp", dirPrefix+"*"))
	for _, dir := range dirs {
		data, err := os.ReadFile(filepath.Join(dir, "owner.pid"))
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err != nil || alive(pid) {
			continue
		}
		logf("cleaning %s, left by a run that died", dir)
		for file, comm := range map[string]string{"docker/docker.pid": "dockerd", "boxd.pid": "boxd", "net/boxd.pid": "boxd", "ab/boxd.pid": "boxd"} {
			if data, err := os.ReadFile(filepath.Join(dir, file)); err == nil {
				if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil {
					killPid(pid, comm)
				}
			}
		}
		// The network scenario's namespaces (boxd's bridge and nftables
		// tables go with them).
		if data, err := os.ReadFile(filepath.Join(dir, "net", "netns")); err == nil {
			for _, ns := range strings.Fields(string(data)) {
				_ = exec.Command("ip", "netns", "del", ns).Run()
			}
		}
		time.Sleep(200 * time.Millisecond)
		if err := removeTree(dir); err != nil {
			logf("cleaning %s: %v", dir, err)
		}
	}
}

func (e *env) boxctlCmd(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, e.boxctl, append([]string{"--socket", e.sock}, args...)...)
}

func (e *env) dockerCmd(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, e.dockerCLI, args...)
	// DOCKER_CONFIG: no ~/.docker, no credential helpers, no contexts.
	cmd.Env = append(os.Environ(), "DOCKER_HOST=unix://"+e.dockerSock, "DOCKER_CONFIG="+filepath.Join(e.dockerDir, "cli"))
	return cmd
}

func (e *env) ctrCmd(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, e.ctrd.Ctr, append([]string{"--address", e.ctrd.Address, "-n", namespace}, args...)...)
}

// run runs cmd and turns a failure into an error carrying its output.
func run(cmd *exec.Cmd) error {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %v: %s", filepath.Base(cmd.Path)+" "+strings.Join(cmd.Args[1:], " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// output runs cmd and returns its stdout.
func output(cmd *exec.Cmd) (string, error) {
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s: %v: %s", filepath.Base(cmd.Path)+" "+strings.Join(cmd.Args[1:], " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	data, _ := io.ReadAll(f)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
