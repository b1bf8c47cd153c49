//go:build linux

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	coci "github.com/containerd/containerd/v2/pkg/oci"

	"github.com/boxd-dev/boxd/internal/gvisor"
	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/boxd-dev/boxd/internal/testenv"
)

// TestGvisorShimRuns: the runsc and containerd-shim-runsc-v1 that
// scripts/setup.sh builds run a container under the test harness's private
// containerd on the systrap platform, with the options boxd writes
// (gvisor.WriteConfig, gvisor.Annotations). The shim's start no longer fails with "failed to
// set OOM Score on shim: permission denied" on a host without
// CAP_SYS_RESOURCE: its score is containerd's + 1 (as containerd's runc
// shim sets its own), not -999. The command inside sees gVisor's kernel,
// not the host's. The container has its own block of 65536 host ids on an
// ID-mapped snapshot, as boxd's sandboxes do: it writes to its root
// filesystem, and runsc's Sentry and gofer run as the block's first id.
// Fails (never skips) if gVisor is not installed.
func TestGvisorShimRuns(t *testing.T) {
	info, err := gvisor.Probe(context.Background(), testenv.Runsc)
	if err != nil {
		t.Fatalf("gVisor must be installed by scripts/setup.sh: %v", err)
	}
	if info.Version != gvisor.Pinned {
		t.Fatalf("%s reports version %q, want the pinned %s", info.Runsc, info.Version, gvisor.Pinned)
	}
	// runsc keeps a bind mount (null-netns, the --network none namespace)
	// in its root: under the harness's directory, which its stop unmounts.
	dir := filepath.Join(env.ctrd.Dir, "gvisor")
	cfg, err := gvisor.WriteConfig(filepath.Join(dir, "cfg"), info, filepath.Join(dir, "root"), filepath.Join(dir, "sandboxes"))
	if err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithTimeout(ctx(t), 90*time.Second)
	defer cancel()
	img, err := env.ctr.GetImage(c, testImage)
	if err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("gvisor-shim-%d", time.Now().UnixNano())
	// A block of 65536 ids as boxd gives each sandbox (above boxd's own
	// range of blocks), on an ID-mapped snapshot: root inside is host uid
	// idBase, and so are the Sentry and the gofer.
	const idBase = 0x7f000000
	idmap := []specs.LinuxIDMapping{{ContainerID: 0, HostID: idBase, Size: 65536}}
	ctr, err := env.ctr.NewContainer(c, id,
		client.WithImage(img),
		client.WithSnapshotter("overlayfs"),
		client.WithNewSnapshot(id, img, client.WithUserNSRemapperLabels(idmap, idmap)),
		client.WithNewSpec(coci.WithImageConfig(img), coci.WithProcessArgs("sh", "-c", "uname -sr; touch /written && echo done; exec sleep 600"),
			coci.WithAnnotations(gvisor.Annotations(id)), coci.WithUserNamespace(idmap, idmap)),
		client.WithRuntime(info.Shim, gvisor.Options(cfg)),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cc, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := ctr.Delete(cc, client.WithSnapshotCleanup); err != nil {
			t.Errorf("delete container: %v", err)
		}
	})
	var out syncBuffer
	task, err := ctr.NewTask(c, cio.NewCreator(cio.WithStreams(nil, &out, &out)))
	if err != nil {
		t.Fatalf("new task on gVisor: %v\ncontainerd log:\n%s", err, env.ctrd.LogTail(30))
	}
	defer task.Delete(context.WithoutCancel(c), client.WithProcessKill)
	exitCh, err := task.Wait(c)
	if err != nil {
		t.Fatal(err)
	}
	// The shim (and nothing else) serves this container: its score is
	// containerd's + 1 while the task lives.
	shimPid := shimOf(t, id)
	if err := task.Start(c); err != nil {
		t.Fatalf("start on gVisor: %v\ncontainerd log:\n%s", err, env.ctrd.LogTail(30))
	}
	ctrdScore := readScore(t, daemonPid(t))
	if got := readScore(t, shimPid); got != ctrdScore+1 {
		t.Errorf("shim %d oom_score_adj %d, want containerd's %d + 1", shimPid, got, ctrdScore)
	}
	// The command stays up (as boxd's init would): the shim's `runsc
	// wait` loses the exit status of a root container whose sandbox is gone
	// before it asks (it then reports 128).
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), "done\n") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(out.String(), "done\n") {
		t.Fatalf("output %q: the command did not write to its root filesystem and finish", out.String())
	}
	// Host-side posture: runsc's two processes for this container run as
	// the block's first id, not as host root.
	for _, name := range []string{"runsc-sandbox", "runsc-gofer"} {
		pids := procsNamed(t, name, filepath.Join(dir, "root"))
		if len(pids) == 0 {
			t.Errorf("no %s process with root %s", name, filepath.Join(dir, "root"))
		}
		for _, pid := range pids {
			if uid := procUID(t, pid); uid != idBase {
				t.Errorf("%s %d runs as host uid %d, want %d (the sandbox's block)", name, pid, uid, idBase)
			}
		}
	}
	if err := task.Kill(c, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	st := <-exitCh
	if code, _, err := st.Result(); err != nil || code != 128+uint32(syscall.SIGKILL) {
		t.Errorf("exit %d %v after SIGKILL, want %d", code, err, 128+syscall.SIGKILL)
	}
	host, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || lines[1] != "done" || !strings.HasPrefix(lines[0], "Linux ") {
		t.Fatalf("output %q, want uname and done", out.String())
	}
	// gVisor's Sentry reports its own kernel release, never the host's.
	if rel := strings.TrimPrefix(lines[0], "Linux "); rel == strings.TrimSpace(string(host)) {
		t.Errorf("the container sees the host's kernel %s: not running on gVisor", rel)
	}
}

// syncBuffer is a bytes.Buffer the shim's output copier writes to while
// the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// procsNamed lists the processes whose argv[0] is name and whose command
// line names root.
func procsNamed(t *testing.T, name, root string) []int {
	t.Helper()
	return procsWhere(func(args []string, cmdline string) bool {
		return args[0] == name && strings.Contains(cmdline, root)
	})
}

// procsWhere lists the host's processes whose command line (split at NUL,
// and whole) match says yes to.
func procsWhere(match func(args []string, cmdline string) bool) []int {
	var pids []int
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if match(strings.Split(string(b), "\x00"), string(b)) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			pids = append(pids, pid)
		}
	}
	return pids
}

// procUID is a process's real uid as the host sees it.
func procUID(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" {
			uid, _ := strconv.Atoi(f[1])
			return uid
		}
	}
	t.Fatalf("no Uid line in /proc/%d/status", pid)
	return -1
}

// shimOf finds the containerd-shim-runsc-v1 process serving container id.
func shimOf(t *testing.T, id string) int {
	t.Helper()
	pids := procsWhere(func(args []string, cmdline string) bool {
		return len(args) > 2 && filepath.Base(args[0]) == gvisor.ShimName && strings.Contains(cmdline, "\x00"+id+"\x00")
	})
	if len(pids) == 0 {
		t.Fatalf("no %s process names container %s", gvisor.ShimName, id)
	}
	return pids[0]
}

// daemonPid is the private containerd's pid.
func daemonPid(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(env.ctrd.Dir, "containerd.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func readScore(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/oom_score_adj", pid))
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return n
}
