//go:build linux

package main

// The Markdown report: the machine, the context a reader needs to judge
// the numbers, one table per kind of result, and the cleanliness checks.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"time"

	"github.com/boxd-dev/boxd/internal/testenv"
)

type report struct {
	started time.Time
	elapsed time.Duration
	cfg     *config
	machine [][2]string
	lats    []*latency
	bursts  []*burstResult
	conc    []*concResult
	density []densityPoint
	// densityShared: docker's density was measured while boxd's sandboxes
	// existed (they are kept for the concurrency scenario).
	densityShared bool
	clean         []cleanRow
	problems      []string
	charts        []string
	// chartNotes say which rows the charts left out, and why.
	chartNotes []string
}

// describe collects what the numbers depend on: hardware, kernel and the
// versions of every component.
func (e *env) describe(ctx context.Context) [][2]string {
	var m [][2]string
	add := func(k, v string) { m = append(m, [2]string{k, v}) }
	cpu := "?"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	add("CPU", fmt.Sprintf("%d cores, %s", goruntime.NumCPU(), cpu))
	memTotal := "?"
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		if f := strings.Fields(strings.SplitN(string(data), "\n", 2)[0]); len(f) >= 2 {
			var kib int64
			fmt.Sscan(f[1], &kib)
			memTotal = fmt.Sprintf("%.1f GiB", float64(kib)/(1<<20))
		}
	}
	add("memory", memTotal)
	osName := "?"
	if data, err := os.ReadFile("/etc/os-release"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
				osName = strings.Trim(v, `"`)
			}
		}
	}
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	cg := "v1"
	if exists("/sys/fs/cgroup/cgroup.controllers") {
		cg = "v2"
	}
	add("system", fmt.Sprintf("%s, kernel %s, cgroup %s", osName, strings.TrimSpace(string(kernel)), cg))
	if v, err := e.cc.Version(ctx); err == nil {
		add("containerd", v.Version+" (private, built from the module proxy at the version go.mod pins; overlayfs snapshotter)")
	}
	if out, err := exec.Command(testenv.Runc, "--version").Output(); err == nil {
		add("runc", strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)[0]+" (pinned, built by scripts/setup.sh: "+testenv.Runc+"), used by all three")
	}
	if v, err := e.docker.version(ctx); err == nil {
		add("docker", v+", Debian's docker.io: private dockerd on the same containerd, overlay2 graph driver, --bridge=none")
	}
	add("boxd", gitDescribe()+", Go "+goruntime.Version())
	if out, err := exec.Command(filepath.Join(e.rootfs, "bin", "busybox")).Output(); err == nil || len(out) > 0 {
		add("image", image+": "+strings.SplitN(string(out), "\n", 2)[0]+" root filesystem (images/busybox), imported into boxd and `docker import`ed into docker")
	}
	return m
}

func gitDescribe() string {
	cmd := exec.Command("git", "describe", "--always", "--dirty")
	cmd.Dir = testenv.RepoRoot()
	out, err := cmd.Output()
	if err != nil {
		return "unknown commit"
	}
	return "commit " + strings.TrimSpace(string(out))
}

func (r *report) markdown() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# boxbench: boxd, Docker and ctr side by side\n\n")
	p("Run %s, %s, `make bench`%s (about %s).\n\n", r.started.UTC().Format("2006-01-02 15:04 UTC"), hostname(), r.cfg.describe(), r.elapsed.Round(time.Second))
	p("| machine | |\n| --- | --- |\n")
	for _, kv := range r.machine {
		p("| %s | %s |\n", kv[0], kv[1])
	}
	p("\n**How to read it.** All systems run on one private containerd and the same runc, in one run. ")
	p("Each scenario runs its peers in rounds, one after another, rotating which goes first (A B C, B C A, ...), after untimed warm-up rounds, ")
	p("so the machine's drift and other load hit all alike. Medians and p95/p99 are nearest-rank. ")
	p("\"÷ boxd\" is the peer's number divided by boxd's: above 1 means the peer takes longer (or, for throughput, does more).\n\n")
	p("**They do not isolate alike.** boxd's sandboxes run in a user namespace (root inside is uid 200000 on the host, with ID-mapped image layers), ")
	p("with seccomp, a minimal capability set, no network, and limits (512 MiB without swap, 1 CPU, 256 pids, a 10 GiB disk cap: the default of each). ")
	p("Docker's containers use Docker's defaults, which include its seccomp profile and default capabilities but no user namespace; ")
	p("the benchmark gives them `--network none` and the same limits. `ctr` uses ctr's defaults: no user namespace, no seccomp profile, no limits. ")
	p("Docker 20.10 keeps images and container layers in its own overlay2 graph driver, not in containerd's snapshotter.\n\n")

	if len(r.lats) > 0 {
		p("## Latency\n\n")
		p("| scenario | peer | samples | errors | median | p95 | median ÷ boxd |\n| --- | --- | ---: | ---: | ---: | ---: | ---: |\n")
		for _, l := range r.lats {
			base := quantile(l.samples[l.peers[0]], 0.5)
			for _, name := range l.peers {
				s := l.samples[name]
				med := quantile(s, 0.5)
				p("| %s | %s | %d | %d | %s | %s | %s |\n", l.scenario, name, len(s), l.errors[name], ms(med), ms(quantile(s, 0.95)), ratio(med, base))
			}
		}
		p("\nCLI rows time the whole process (fork, exec, connect, the call, exit), as a shell script sees it. ")
		p("Every row but the back-to-back one samples calls that follow the other peers' turns, a pause of 100 ms or more for the peer measured; on this kind of VM every process involved, the kernel's fork and exec included, runs slower after such a pause. ")
		p("The back-to-back row gives each peer 10 calls in a row per turn and samples the 9 that follow the same peer's previous call, as a script or an agent running commands one after another sees it. ")
		p("The Go-client rows keep one client: boxd's Go client (Connect over HTTP/2 on its Unix socket) and the Docker Engine API over HTTP/1.1 on dockerd's socket ")
		p("(POST /containers/ID/exec, POST /exec/ID/start hijacked until the stream ends, GET /exec/ID/json for the exit code), written with net/http.\n\n")
		r.errorNotes(&b)
	}
	if len(r.bursts) > 0 {
		base := quantile(r.bursts[0].samples, 0.5)
		p("## Time to interactive, burst\n\n")
		p("%d sandboxes requested at the same instant through each API (create, then the first command `echo ready`); each sandbox's time runs from the common start to its output. ", r.bursts[0].n)
		p("\"all ready\" is the median over rounds of the time until the last one answered.\n\n")
		p("| peer | at once | rounds | errors | median | p95 | all ready | median ÷ boxd |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		for _, br := range r.bursts {
			med := quantile(br.samples, 0.5)
			p("| %s | %d | %d | %d | %s | %s | %s | %s |\n", br.peer, br.n, len(br.walls), br.errors, ms(med), ms(quantile(br.samples, 0.95)), ms(quantile(br.walls, 0.5)), ratio(med, base))
		}
		p("\nFor scale: the best hosted sandbox services report about **190 ms** median time to interactive one at a time and about **370 ms** in bursts; ")
		p("those numbers include their network, these are one local host with %d cores.\n\n", goruntime.NumCPU())
		for _, br := range r.bursts {
			if br.firstErr != "" {
				p("- %s, first burst error: `%s`\n", br.peer, oneLine(br.firstErr))
			}
		}
	}
	if len(r.conc) > 0 {
		p("## Concurrency\n\n")
		p("N clients at once, each with its own sandbox, run `true` back to back through the API: each sandbox max(%d, %d/N) times, in two rounds with the order of the peers swapped, after one untimed exec per sandbox. ", r.cfg.execsPer, r.cfg.levelExecs)
		p("Throughput is successful execs per second of wall time.\n\n")
		p("| sandboxes | peer | execs | errors | throughput | p50 | p99 | throughput ÷ boxd | p50 ÷ boxd |\n| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		var base *concResult
		for _, c := range r.conc {
			if base == nil || base.level != c.level {
				base = c
			}
			tr := "–"
			if base.throughput() > 0 {
				tr = fmt.Sprintf("%.2f×", c.throughput()/base.throughput())
			}
			med := quantile(c.lat, 0.5)
			p("| %d | %s | %d | %d | %.0f/s | %s | %s | %s | %s |\n", c.level, c.peer, c.execs, c.errors, c.throughput(), ms(med), ms(quantile(c.lat, 0.99)), tr, ratio(med, quantile(base.lat, 0.5)))
		}
		p("\n")
		for _, c := range r.conc {
			if c.firstErr != "" {
				p("- %s at %d, first error: `%s`\n", c.peer, c.level, oneLine(c.firstErr))
			}
		}
	}
	if len(r.density) > 0 {
		p("## Density: host memory per idle sandbox\n\n")
		if r.densityShared {
			p("boxd first, then docker, each from none of its sandboxes to N idle ones (boxd: boxd-init as PID 1; docker: `sleep`). ")
			p("boxd's stay for the concurrency scenario, so docker's are measured while boxd's exist: the shims' shared pages (the same binary) are then split among more processes, ")
			p("which gives docker's shims slightly smaller shares (tens of KiB) and errs against boxd. Per sandbox, in MiB:\n\n")
		} else {
			p("Each system alone, from none of its sandboxes to N idle ones (boxd: boxd-init as PID 1; docker: `sleep`). Per sandbox, in MiB:\n\n")
		}
		p("- **PSS** sums the proportional set size (`/proc/PID/smaps_rollup`) of the shims serving the system's containerd namespace and every process under them, ")
		p("plus the growth of its daemon (boxd or dockerd) and of containerd since the baseline. Shared pages are split among the processes sharing them, so these add up; other work on the machine does not disturb them.\n")
		p("- **host used** is the growth of MemTotal − MemAvailable (`/proc/meminfo`, median of 5 readings): it also counts kernel memory (page tables, cgroups, mounts, namespaces) but also anything else the machine did meanwhile.\n\n")
		p("| peer | sandboxes | shim | sandbox processes | daemon | containerd | **PSS total** | host used | PSS ÷ boxd |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		basePSS := map[int]float64{}
		for _, d := range r.density {
			if strings.HasPrefix(d.peer, "boxd") {
				basePSS[d.n] = perMiB(d.pss(), d.n)
			}
		}
		for _, d := range r.density {
			rt := "–"
			if b := basePSS[d.n]; b > 0 {
				rt = fmt.Sprintf("%.2f×", perMiB(d.pss(), d.n)/b)
			}
			p("| %s | %d | %.2f | %.2f | %.2f | %.2f | **%.2f** | %.2f | %s |\n", d.peer, d.n, perMiB(d.shims, d.n), perMiB(d.sandboxes, d.n),
				perMiB(d.daemon, d.n), perMiB(d.containerd, d.n), perMiB(d.pss(), d.n), perMiB(d.used, d.n), rt)
		}
		p("\n")
	}
	if len(r.clean) > 0 {
		p("## Cleanliness\n\n")
		p("After each scenario, what is left above the state right after set-up (waiting up to 10 s for shims to exit). ")
		p("boxd and ctr share containerd namespace `%s`; dockerd uses `%s`. Processes are the shims of that namespace and everything under them; ", namespace, dockerNamespace)
		p("mounts are those under containerd's and dockerd's directories; docker's layers are its overlay2 directories.\n\n")
		p("| after | boxd + ctr: sandboxes / containers / tasks / active snapshots / state dirs / mounts / processes | docker: containers / containerd containers / tasks / layers / mounts / processes | |\n| --- | --- | --- | --- |\n")
		for _, c := range r.clean {
			verdict := "clean"
			if c.err != nil {
				verdict = "check failed: " + oneLine(c.err.Error())
			} else if !c.ok() {
				verdict = "**LEAK**"
			}
			if c.scenario == "teardown" {
				p("| teardown (dockerd, boxd, containerd stopped; directories removed) | – | – | %s |\n", verdict)
				continue
			}
			p("| %s | %s | %s | %s |\n", c.scenario, c.left.boxdCells(), c.left.dockerCells(), verdict)
		}
		p("\n")
	}
	if len(r.charts) > 0 {
		p("## Charts\n\n")
		for _, c := range r.charts {
			p("![%s](%s)\n\n", strings.TrimSuffix(c, ".png"), c)
		}
	}
	for _, n := range r.chartNotes {
		p("- %s\n", oneLine(n))
	}
	if len(r.chartNotes) > 0 {
		p("\n")
	}
	if len(r.problems) > 0 {
		p("## Problems in this run\n\n")
		for _, pr := range r.problems {
			p("- %s\n", oneLine(pr))
		}
		p("\n")
	}
	return b.String()
}

func (r *report) errorNotes(b *strings.Builder) {
	var notes []string
	for _, l := range r.lats {
		for _, name := range l.peers {
			if e := l.firstErr[name]; e != "" {
				notes = append(notes, fmt.Sprintf("- %s, %s: %d errors, first: `%s`\n", l.scenario, name, l.errors[name], oneLine(e)))
			}
		}
	}
	for _, n := range notes {
		b.WriteString(n)
	}
	if len(notes) > 0 {
		b.WriteString("\n")
	}
}

func perMiB(kib int64, n int) float64 {
	if n == 0 {
		return 0
	}
	return float64(kib) / 1024 / float64(n)
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	s = strings.ReplaceAll(s, "|", "\\|")
	s = strings.ReplaceAll(s, "`", "'")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

func hostname() string {
	h, _ := os.Hostname()
	return "host " + h
}
