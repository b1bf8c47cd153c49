//go:build linux

// Command boxbench measures boxd against its peers on the same private
// containerd in one run, interleaving them (A, B, A, B...) after a warm-up
// so drift on a shared machine hits all alike. It prints a Markdown table
// and writes it to bench/results/.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"sort"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/boxd-dev/boxd/internal/testenv"
	rpcclient "github.com/boxd-dev/boxd/rpc/client"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

const (
	namespace = "boxd-bench"
	image     = "boxd/busybox:latest"
)

type peer struct {
	name string
	run  func(i int) error
}

type result struct {
	scenario string
	peers    []string
	samples  map[string][]time.Duration
	errors   map[string]int
}

func main() {
	n := flag.Int("n", 50, "samples per peer and scenario")
	out := flag.String("out", "bench/results/latest.md", "where to write the Markdown table")
	flag.Parse()
	if err := run(*n, *out); err != nil {
		fmt.Fprintln(os.Stderr, "boxbench:", err)
		os.Exit(1)
	}
}

func run(n int, outPath string) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("needs root (it starts containerd)")
	}
	ctrd, err := testenv.StartContainerd()
	if err != nil {
		return err
	}
	defer ctrd.Stop()
	dir, err := os.MkdirTemp("", "boxbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	_ = os.Chmod(dir, 0o711)
	boxd, boxctl, initBin, err := testenv.BuildBinaries(filepath.Join(dir, "bin"))
	if err != nil {
		return err
	}
	rootfs, err := testenv.BusyboxRootfs()
	if err != nil {
		return err
	}
	sock := filepath.Join(dir, "run", "boxd.sock")
	daemon := exec.Command(boxd, "--socket", sock, "--containerd", ctrd.Address, "--namespace", namespace,
		"--state-dir", filepath.Join(dir, "state"), "--init-binary", initBin, "--runc", testenv.Runc, "--default-image", image)
	logf, _ := os.Create(filepath.Join(dir, "boxd.log"))
	daemon.Stdout, daemon.Stderr = logf, logf
	if err := daemon.Start(); err != nil {
		return err
	}
	defer func() { _ = daemon.Process.Kill(); _, _ = daemon.Process.Wait() }()
	bc := func(args ...string) *exec.Cmd {
		return exec.Command(boxctl, append([]string{"--socket", sock}, args...)...)
	}
	for i := 0; ; i++ {
		if err := bc("ls").Run(); err == nil {
			break
		}
		if i > 200 {
			return fmt.Errorf("boxd did not start")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if out, err := bc("image", "import", "--rootfs", rootfs, "--name", image).CombinedOutput(); err != nil {
		return fmt.Errorf("import: %v %s", err, out)
	}
	ctr := func(args ...string) *exec.Cmd {
		return exec.Command(ctrd.Ctr, append([]string{"--address", ctrd.Address, "-n", namespace}, args...)...)
	}
	ctx := context.Background()
	api := rpcclient.New(sock)

	// Long-lived subjects for the exec scenarios.
	created, err := api.CreateSandbox(ctx, connect.NewRequest(&boxdv1.CreateSandboxRequest{}))
	if err != nil {
		return err
	}
	sbID := created.Msg.Sandbox.Id
	defer api.DeleteSandbox(ctx, connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: sbID}))
	if out, err := ctr("run", "-d", image, "bench-peer", "sleep", "100000").CombinedOutput(); err != nil {
		return fmt.Errorf("ctr run -d: %v %s", err, out)
	}
	defer func() {
		_ = ctr("task", "kill", "-s", "SIGKILL", "bench-peer").Run()
		time.Sleep(200 * time.Millisecond)
		_ = ctr("task", "delete", "-f", "bench-peer").Run()
		_ = ctr("container", "delete", "bench-peer").Run()
	}()

	var results []result
	results = append(results, measure("exec `true` in a running sandbox, whole CLI process", n, []peer{
		{"boxctl exec", func(int) error { return bc("exec", sbID, "--", "true").Run() }},
		{"ctr task exec", func(i int) error {
			return ctr("task", "exec", "--exec-id", fmt.Sprintf("e%d", i), "bench-peer", "true").Run()
		}},
	}))
	results = append(results, measure("exec `true` from a running Go client (API round trip)", n*4, []peer{
		{"boxd API Exec", func(int) error {
			r, err := api.Exec(ctx, connect.NewRequest(&boxdv1.ExecRequest{SandboxId: sbID, Args: []string{"true"}}))
			if err == nil && r.Msg.Result.ExitCode != 0 {
				err = fmt.Errorf("exit %d", r.Msg.Result.ExitCode)
			}
			return err
		}},
	}))
	results = append(results, measure("one-shot run of `true` (create, run, delete)", max(n/2, 5), []peer{
		{"boxctl run", func(int) error { return bc("run", "--", "true").Run() }},
		{"ctr run --rm", func(i int) error { return ctr("run", "--rm", image, fmt.Sprintf("oneshot-%d", i), "true").Run() }},
	}))

	md := render(results, n)
	fmt.Print(md)
	if outPath != "" {
		if err := os.MkdirAll(filepath.Dir(outPath), 0o755); err != nil {
			return err
		}
		return os.WriteFile(outPath, []byte(md), 0o644)
	}
	return nil
}

// measure runs each peer once per round, rotating which goes first, after
// three warm-up rounds.
func measure(scenario string, n int, peers []peer) result {
	r := result{scenario: scenario, samples: map[string][]time.Duration{}, errors: map[string]int{}}
	for _, p := range peers {
		r.peers = append(r.peers, p.name)
	}
	for i := -3; i < n; i++ {
		for k := range peers {
			p := peers[(k+max(i, 0))%len(peers)]
			start := time.Now()
			err := p.run(i + 3)
			d := time.Since(start)
			if i < 0 {
				continue
			}
			if err != nil {
				r.errors[p.name]++
				continue
			}
			r.samples[p.name] = append(r.samples[p.name], d)
		}
	}
	return r
}

func quantile(s []time.Duration, q float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	c := append([]time.Duration(nil), s...)
	sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
	return c[int(q*float64(len(c)-1)+0.5)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/1e6) }

func render(rs []result, n int) string {
	var b strings.Builder
	host, _ := os.Hostname()
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	fmt.Fprintf(&b, "# boxbench results\n\n%s, %d cores, kernel %s, %s; private containerd, Debian runc; samples interleaved after 3 warm-up rounds.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), goruntime.NumCPU(), strings.TrimSpace(string(kernel)), host)
	fmt.Fprintln(&b, "| scenario | peer | samples | errors | median | p95 | median vs first peer |")
	fmt.Fprintln(&b, "| --- | --- | ---: | ---: | ---: | ---: | ---: |")
	for _, r := range rs {
		base := quantile(r.samples[r.peers[0]], 0.5)
		for _, p := range r.peers {
			med := quantile(r.samples[p], 0.5)
			ratio := "1.0×"
			if p != r.peers[0] && base > 0 {
				ratio = fmt.Sprintf("%.1f× slower", float64(med)/float64(base))
			}
			fmt.Fprintf(&b, "| %s | %s | %d | %d | %s | %s | %s |\n", r.scenario, p, len(r.samples[p]), r.errors[p], ms(med), ms(quantile(r.samples[p], 0.95)), ratio)
		}
	}
	return b.String()
}
