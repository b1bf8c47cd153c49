//go:build linux

package e2e

import (
	"bufio"
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

func statsOnce(t *testing.T, id string) *boxdv1.SandboxStats {
	t.Helper()
	stream, err := env.api.Stats(ctx(t), connect.NewRequest(&boxdv1.StatsRequest{Ids: []string{id}, Interval: "300ms"}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	var got []*boxdv1.StatsResponse
	for stream.Receive() {
		got = append(got, stream.Msg())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || len(got[0].Sandboxes) != 1 || got[0].Sandboxes[0].Id != id || got[0].Sandboxes[0].Usage == nil {
		t.Fatalf("one-shot stats: %v", got)
	}
	return got[0].Sandboxes[0]
}

// TestStatsMoveWithLoad: memory a process holds, bytes written and synced
// to disk, and CPU burnt all show in the figures; the table has docker
// stats' columns and "-" for the network of a sandbox without one.
func TestStatsMoveWithLoad(t *testing.T) {
	id := newSandbox(t, "--memory", "160m", "--cpus", "0.5")
	base := statsOnce(t, id)
	if base.State != "running" || base.MemoryLimitBytes != 160<<20 || base.Usage.MemoryLimitBytes != 160<<20 || base.Usage.Pids == 0 || base.Usage.Network {
		t.Fatalf("baseline: %v", base)
	}

	// Memory: dd holds a 64 MiB buffer it filled while its write to the pipe
	// blocks (sleep never reads).
	if _, err := boxctl(nil, "exec", "-d", id, "--", "sh", "-c", "dd if=/dev/zero bs=64M count=1 | sleep 600"); err != nil {
		t.Fatal(err)
	}
	var mem *boxdv1.SandboxStats
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		mem = statsOnce(t, id)
		if mem.Usage.MemoryBytes >= base.Usage.MemoryBytes+60<<20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("memory did not grow by 64 MiB: %d -> %d", base.Usage.MemoryBytes, mem.Usage.MemoryBytes)
		}
	}
	if mem.Usage.MemoryPeakBytes < mem.Usage.MemoryBytes || mem.Usage.Pids < base.Usage.Pids+2 {
		t.Errorf("with dd holding 64 MiB: peak %d < usage %d, or pids %d (before %d)", mem.Usage.MemoryPeakBytes, mem.Usage.MemoryBytes, mem.Usage.Pids, base.Usage.Pids)
	}

	// Block I/O: 16 MiB written to the writable layer and synced.
	sh(t, id, "dd if=/dev/zero of=/workspace/blob bs=1M count=16 conv=fsync 2>/dev/null")
	blk := statsOnce(t, id)
	if blk.Usage.BlockWriteBytes < base.Usage.BlockWriteBytes+16<<20 {
		t.Errorf("block write bytes %d -> %d after writing and syncing 16 MiB", base.Usage.BlockWriteBytes, blk.Usage.BlockWriteBytes)
	}

	// CPU: a burner under --cpus 0.5 shows near 50% (never much above).
	if _, err := boxctl(nil, "exec", "-d", id, "--", "sh", "-c", "while :; do :; done"); err != nil {
		t.Fatal(err)
	}
	waitCPUProgress(t, id, cgroupCPU(t, id), 100*time.Millisecond, 20*time.Second)
	// On a loaded machine the burner may get less than its quota for a
	// while: wait for a sample that shows it working; none may show more
	// than the quota allows.
	for deadline := time.Now().Add(30 * time.Second); ; {
		cpu := statsOnce(t, id)
		if cpu.CpuPercent > 65 {
			t.Fatalf("burner under --cpus 0.5: %.1f%%, above the quota", cpu.CpuPercent)
		}
		if cpu.CpuPercent >= 20 && cpu.Usage.CpuUsec > base.Usage.CpuUsec {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("burner under --cpus 0.5: last sample %.1f%% (cpu_usec %d -> %d)", cpu.CpuPercent, base.Usage.CpuUsec, cpu.Usage.CpuUsec)
		}
	}

	// The table.
	out, err := boxctl(nil, "stats", "--no-stream", id)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "CPU %") || !strings.Contains(lines[0], "MEM USAGE / LIMIT") ||
		!strings.Contains(lines[0], "MEM PEAK") || !strings.Contains(lines[0], "BLOCK I/O") || !strings.Contains(lines[0], "NET I/O") ||
		!strings.Contains(lines[0], "OOM KILLS") || !strings.HasPrefix(lines[1], id) || !strings.Contains(lines[1], "/ 160.00MiB") ||
		!strings.Contains(lines[1], " - ") {
		t.Errorf("stats table:\n%s", out)
	}

	// Streaming: samples keep coming until boxctl is stopped.
	cmd := exec.Command(env.boxctl, "--socket", env.socket, "stats", "--json", "--interval", "200ms", id)
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	sc := bufio.NewScanner(pipe)
	var prevCPU uint64
	for i := 0; i < 3; i++ {
		if !sc.Scan() {
			t.Fatalf("stats stream ended after %d samples: %v", i, sc.Err())
		}
		var msg struct {
			Sandboxes []struct {
				ID    string `json:"id"`
				Usage struct {
					CPUUsec string `json:"cpu_usec"`
				} `json:"usage"`
			} `json:"sandboxes"`
		}
		if err := json.Unmarshal(sc.Bytes(), &msg); err != nil || len(msg.Sandboxes) != 1 || msg.Sandboxes[0].ID != id {
			t.Fatalf("sample %d: %s (%v)", i, sc.Text(), err)
		}
		c, err := strconv.ParseUint(msg.Sandboxes[0].Usage.CPUUsec, 10, 64)
		if err != nil || c <= prevCPU {
			t.Errorf("sample %d: cpu_usec %q did not grow from %d", i, msg.Sandboxes[0].Usage.CPUUsec, prevCPU)
		}
		prevCPU = c
	}

	// Bad input.
	wantCode(t, "stats of a missing sandbox", statsErr(t, &boxdv1.StatsRequest{Ids: []string{"no-such-sandbox"}}), connect.CodeNotFound, "no-such-sandbox")
	wantCode(t, "stats interval 1ns", statsErr(t, &boxdv1.StatsRequest{Interval: "1ns"}), connect.CodeInvalidArgument, "interval")
}

// statsErr is how a stats call ended.
func statsErr(t *testing.T, req *boxdv1.StatsRequest) error {
	stream, err := env.api.Stats(ctx(t), connect.NewRequest(req))
	if err != nil {
		return err
	}
	defer stream.Close()
	for stream.Receive() {
	}
	return stream.Err()
}
