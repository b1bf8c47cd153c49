//go:build linux

// Command boxbench measures boxd against Docker and ctr on one private
// containerd in one run (make bench). It sets up like `make test` (a
// private containerd at the pinned version, the boxd binaries, the busybox
// root filesystem) plus a private dockerd from Debian's docker.io on the
// same containerd, runs the scenarios with their peers interleaved, checks
// after each scenario that nothing leaked, tears everything down, and
// writes a Markdown table and PNG charts (bench/results/).
//
// Scenarios (-only picks some): exec, tti, oneshot, files, concurrency,
// density, ports, sdk, network, commitfork, pull, owner, pause, build, pool, gvisor (runc vs gVisor), volumes, diff, code, checkpoint, dockerapi. BENCH_QUICK=1 (or -quick) is a small run for development;
// BENCH_N, BENCH_BURST, BENCH_LEVELS, BENCH_EXECS, BENCH_DENSITY, BENCH_ONLY
// and BENCH_OUT set the corresponding flags. It exits non-zero if a
// scenario failed or anything leaked.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type config struct {
	quick bool
	warm  int // untimed rounds before each latency scenario
	// rounds per peer
	n, apiN, ttiN, oneshotN, bigN, treeN int
	commitN                              int // fork and commit rounds
	// burst: sandboxes at once, and how many bursts per peer
	burst, burstRounds int
	bigMiB, treeFiles  int
	portMiB, portN     int   // ports: download size and rounds
	levels             []int // concurrency: sandboxes busy at once
	execsPer           int   // concurrency: execs per sandbox and level
	levelExecs         int   // concurrency: at least this many execs per level
	density            []int // sandboxes at which density is measured
	only               map[string]bool
	outDir             string
}

// describe says how the run was sized, for the report's first line.
func (c *config) describe() string {
	mode := ""
	if c.quick {
		mode = "BENCH_QUICK=1, "
	}
	return fmt.Sprintf(" (%sn=%d, burst %d×%d, concurrency %v × max(%d, %d/N) execs, density %v)", mode, c.n, c.burst, c.burstRounds, c.levels, c.execsPer, c.levelExecs, c.density)
}

// wants reports whether scenario id is to run.
func (c *config) wants(id string) bool { return c.only == nil || c.only[id] }

// wantsAny reports whether any of the comma-separated ids is to run.
func (c *config) wantsAny(ids string) bool {
	for _, id := range strings.Split(ids, ",") {
		if c.wants(id) {
			return true
		}
	}
	return false
}

var scenarioIDs = []string{"exec", "tti", "oneshot", "files", "concurrency", "density", "ports", "sdk", "network", "commitfork", "pull", "owner", "pause", "build", "pool", "gvisor", "volumes", "diff", "code", "checkpoint", "dockerapi"}

func main() {
	if len(os.Args) == 4 && os.Args[1] == bareConnectArg {
		fmt.Fprintln(os.Stderr, "boxbench bare-connect:", serveBareConnect(os.Args[2], os.Args[3]))
		os.Exit(1)
	}
	if len(os.Args) == 3 && os.Args[1] == bareSpawnerArg {
		fmt.Fprintln(os.Stderr, "boxbench bare-spawner:", serveBareSpawner(os.Args[2]))
		os.Exit(1)
	}
	cfg, err := parseFlags()
	if err != nil {
		fmt.Fprintln(os.Stderr, "boxbench:", err)
		os.Exit(2)
	}
	os.Exit(benchmark(cfg))
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func envBool(name string) bool {
	v, _ := strconv.ParseBool(os.Getenv(name))
	return v
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := strconv.Atoi(f)
		if err != nil || v < 1 {
			return nil, fmt.Errorf("%q: want positive integers separated by commas", s)
		}
		out = append(out, v)
	}
	return out, nil
}

func parseFlags() (*config, error) {
	quick := flag.Bool("quick", envBool("BENCH_QUICK"), "small, fast run for development (env BENCH_QUICK=1)")
	n := flag.Int("n", 0, "rounds of the CLI exec scenario; the others scale from it (env BENCH_N; default 30, quick 6)")
	burst := flag.Int("burst", 0, "sandboxes requested at once in the burst (env BENCH_BURST; default 100, quick 10)")
	burstRounds := flag.Int("burst-rounds", 0, "bursts per peer (default 1)")
	levels := flag.String("levels", os.Getenv("BENCH_LEVELS"), "concurrency levels (env BENCH_LEVELS; default 1,10,50,100, quick 1,5,10)")
	execs := flag.Int("execs", 0, "concurrency: execs per sandbox and level (env BENCH_EXECS; default 2)")
	levelExecs := flag.Int("level-execs", 0, "concurrency: at least this many execs per level in all (default 50, quick 20)")
	density := flag.String("density", os.Getenv("BENCH_DENSITY"), "density: idle sandboxes to measure at (env BENCH_DENSITY; default 50,100, quick 5,10)")
	bigMiB := flag.Int("big-mib", 0, "size of the big file in MiB (default 100, quick 20)")
	files := flag.Int("files", 0, "small files in the tree (default 1000, quick 200)")
	portMiB := flag.Int("port-mib", 0, "ports: MiB downloaded through the published port (default 256, quick 64)")
	only := flag.String("only", os.Getenv("BENCH_ONLY"), "comma-separated scenarios to run, of "+strings.Join(scenarioIDs, ",")+" (env BENCH_ONLY; default all)")
	out := flag.String("out", os.Getenv("BENCH_OUT"), "directory for latest.md and the charts (env BENCH_OUT; default bench/results, quick bench/results/quick)")
	flag.Parse()

	envInt := func(p *int, name string) error {
		if *p != 0 {
			return nil
		}
		if v := os.Getenv(name); v != "" {
			x, err := strconv.Atoi(v)
			if err != nil || x < 1 {
				return fmt.Errorf("%s=%q: want a positive integer", name, v)
			}
			*p = x
		}
		return nil
	}
	if err := envInt(n, "BENCH_N"); err != nil {
		return nil, err
	}
	if err := envInt(burst, "BENCH_BURST"); err != nil {
		return nil, err
	}
	if err := envInt(execs, "BENCH_EXECS"); err != nil {
		return nil, err
	}
	pick := func(v, full, small int) int {
		switch {
		case v > 0:
			return v
		case *quick:
			return small
		default:
			return full
		}
	}
	cfg := &config{quick: *quick, warm: 3}
	cfg.n = pick(*n, 30, 6)
	cfg.apiN = cfg.n * 4
	cfg.ttiN = max(cfg.n/2, 3)
	cfg.oneshotN = max(cfg.n/2, 3)
	cfg.bigN = max(cfg.n/8, 2)
	cfg.treeN = max(cfg.n/4, 2)
	cfg.commitN = max(cfg.n/3, 3)
	cfg.burst = pick(*burst, 100, 10)
	cfg.burstRounds = pick(*burstRounds, 1, 1)
	cfg.execsPer = pick(*execs, 2, 2)
	cfg.levelExecs = pick(*levelExecs, 50, 20)
	cfg.bigMiB = pick(*bigMiB, 100, 20)
	cfg.treeFiles = pick(*files, 1000, 200)
	cfg.portMiB = pick(*portMiB, 256, 64)
	cfg.portN = max(cfg.n/5, 3)
	if *quick {
		cfg.warm = 1
	}
	var err error
	def := func(s, full, small string) string {
		switch {
		case s != "":
			return s
		case *quick:
			return small
		default:
			return full
		}
	}
	if cfg.levels, err = parseInts(def(*levels, "1,10,50,100", "1,5,10")); err != nil {
		return nil, fmt.Errorf("-levels %w", err)
	}
	if cfg.density, err = parseInts(def(*density, "50,100", "5,10")); err != nil {
		return nil, fmt.Errorf("-density %w", err)
	}
	cfg.outDir = def(*out, "bench/results", "bench/results/quick")
	if *only != "" {
		cfg.only = map[string]bool{}
		for _, s := range strings.Split(*only, ",") {
			s = strings.TrimSpace(s)
			known := false
			for _, id := range scenarioIDs {
				known = known || id == s
			}
			if !known {
				return nil, fmt.Errorf("-only: unknown scenario %q (have %s)", s, strings.Join(scenarioIDs, ","))
			}
			cfg.only[s] = true
		}
	}
	return cfg, nil
}

// scenario is one group of measurements; run adds its results to the
// report.
type scenario struct {
	id, title string
	run       func(ctx context.Context, e *env, cfg *config, r *report) error
}

var scenarios = []scenario{
	{"exec", "1. exec round trip", func(ctx context.Context, e *env, cfg *config, r *report) error {
		ls, err := scenarioExec(ctx, e, cfg)
		r.lats = append(r.lats, ls...)
		return err
	}},
	{"tti", "2. time to interactive", func(ctx context.Context, e *env, cfg *config, r *report) error {
		seq, bursts, err := scenarioTTI(ctx, e, cfg)
		r.lats = append(r.lats, seq...)
		r.bursts = bursts
		return err
	}},
	{"oneshot", "3. one-shot run", func(ctx context.Context, e *env, cfg *config, r *report) error {
		l, err := scenarioOneshot(ctx, e, cfg)
		if l != nil {
			r.lats = append(r.lats, l)
		}
		return err
	}},
	{"files", "4. files", func(ctx context.Context, e *env, cfg *config, r *report) error {
		ls, err := scenarioFiles(ctx, e, cfg)
		r.lats = append(r.lats, ls...)
		return err
	}},
	{"ports", "7. published port", func(ctx context.Context, e *env, cfg *config, r *report) error {
		l, err := scenarioPorts(ctx, e, cfg)
		if l != nil {
			r.lats = append(r.lats, l)
		}
		return err
	}},
	{"sdk", "8. Python and TypeScript SDKs", func(ctx context.Context, e *env, cfg *config, r *report) error {
		ls, err := scenarioSDK(ctx, e, cfg)
		r.lats = append(r.lats, ls...)
		return err
	}},
	{"network", "9. network modes", func(ctx context.Context, e *env, cfg *config, r *report) error {
		l, err := scenarioNetwork(ctx, e, cfg)
		if l != nil {
			r.lats = append(r.lats, l)
		}
		return err
	}},
	{"commitfork", "10. fork and commit", func(ctx context.Context, e *env, cfg *config, r *report) error {
		ls, err := scenarioCommitFork(ctx, e, cfg)
		r.lats = append(r.lats, ls...)
		return err
	}},
	{"pull", "11. registry pull", func(ctx context.Context, e *env, cfg *config, r *report) error {
		l, err := scenarioPull(ctx, e, cfg)
		if l != nil {
			r.lats = append(r.lats, l)
		}
		return err
	}},
	{"owner", "12. ownership check", func(ctx context.Context, e *env, cfg *config, r *report) error {
		l, err := scenarioOwner(ctx, e, cfg)
		if l != nil {
			r.lats = append(r.lats, l)
		}
		return err
	}},
	{"pause", "13. pause and resume", func(ctx context.Context, e *env, cfg *config, r *report) error {
		ls, err := scenarioPause(ctx, e, cfg)
		r.lats = append(r.lats, ls...)
		return err
	}},
	{"build", "14. Dockerfile build", func(ctx context.Context, e *env, cfg *config, r *report) error {
		l, err := scenarioBuild(ctx, e, cfg)
		if l != nil {
			r.lats = append(r.lats, l)
		}
		return err
	}},
	{"pool", "15. warm pool", func(ctx context.Context, e *env, cfg *config, r *report) error {
		l, br, err := scenarioPool(ctx, e, cfg)
		if l != nil {
			r.lats = append(r.lats, l)
		}
		r.bursts = append(r.bursts, br...)
		return err
	}},
	{"volumes", "16. volumes", func(ctx context.Context, e *env, cfg *config, r *report) error {
		ls, err := scenarioVolumes(ctx, e, cfg)
		r.lats = append(r.lats, ls...)
		return err
	}},
	{"diff", "17. what changed", func(ctx context.Context, e *env, cfg *config, r *report) error {
		ls, err := scenarioDiff(ctx, e, cfg)
		r.lats = append(r.lats, ls...)
		return err
	}},
	{"code", "18. code interpreter", func(ctx context.Context, e *env, cfg *config, r *report) error {
		ls, err := scenarioCode(ctx, e, cfg)
		r.lats = append(r.lats, ls...)
		return err
	}},
	{"checkpoint", "19. checkpoint and restore", func(ctx context.Context, e *env, cfg *config, r *report) error {
		ls, err := scenarioCheckpoint(ctx, e, cfg)
		r.lats = append(r.lats, ls...)
		return err
	}},
	{"dockerapi", "Docker Engine API: boxd's endpoint vs dockerd", func(ctx context.Context, e *env, cfg *config, r *report) error {
		ls, err := scenarioDockerAPI(ctx, e, cfg)
		r.lats = append(r.lats, ls...)
		return err
	}},
	{"gvisor", "runc vs gVisor", func(ctx context.Context, e *env, cfg *config, r *report) error {
		ls, ds, err := scenarioGvisor(ctx, e, cfg)
		r.lats = append(r.lats, ls...)
		r.density = append(r.density, ds...)
		return err
	}},
	// Density runs first and hands its sandboxes to the concurrency
	// scenario, which saves minutes of creating and removing 200; the
	// cleanliness check therefore comes after both.
	{"density,concurrency", "6. density and 5. concurrency", func(ctx context.Context, e *env, cfg *config, r *report) error {
		var fleet [][]string
		if cfg.wants("density") {
			ds, kept, err := scenarioDensity(ctx, e, cfg, cfg.wants("concurrency"))
			r.density, r.densityShared = append(r.density, ds...), cfg.wants("concurrency")
			if err != nil {
				return err
			}
			fleet = kept
		}
		if cfg.wants("concurrency") {
			cs, err := scenarioConcurrency(ctx, e, cfg, fleet)
			r.conc = cs
			return err
		}
		return nil
	}},
}

// benchmark runs everything and returns the exit code.
func benchmark(cfg *config) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigc := make(chan os.Signal, 2)
	signal.Notify(sigc, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-sigc
		logf("%v: stopping; tearing down (send it again to quit at once and leave the clean-up to the next run)", s)
		cancel()
		<-sigc
		os.Exit(130)
	}()

	rep := &report{started: time.Now(), cfg: cfg}
	e, err := setup(ctx)
	if err != nil {
		logf("set-up: %v", err)
		return 1
	}
	rep.machine = e.describe(ctx)
	failed := false
	for _, sc := range scenarios {
		if !cfg.wantsAny(sc.id) {
			continue
		}
		t0 := time.Now()
		title := sc.title
		if sc.id == "density,concurrency" && !cfg.wants("density") {
			title = "5. concurrency"
		} else if sc.id == "density,concurrency" && !cfg.wants("concurrency") {
			title = "6. density"
		}
		logf("== %s", title)
		if err := sc.run(ctx, e, cfg, rep); err != nil {
			logf("%s: %v", title, err)
			rep.problems = append(rep.problems, title+": "+err.Error())
			failed = true
		}
		row := e.checkClean(context.WithoutCancel(ctx), title)
		rep.clean = append(rep.clean, row)
		if !row.ok() {
			failed = true
			e.removeLeftovers()
		}
		logf("== %s done in %s", title, time.Since(t0).Round(time.Second))
		if ctx.Err() != nil {
			break
		}
	}
	dir, ctrdDir := e.dir, e.ctrd.Dir
	e.keepLogs = failed || ctx.Err() != nil
	terr := e.teardown()
	if terr == nil {
		terr = checkTeardown(dir, ctrdDir)
	}
	rep.clean = append(rep.clean, cleanRow{scenario: "teardown", err: terr})
	if terr != nil {
		logf("teardown: %v", terr)
		failed = true
	}
	if ctx.Err() != nil {
		rep.problems = append(rep.problems, "interrupted: the results are partial")
		failed = true
	}
	notesMu.Lock()
	rep.problems = append(rep.problems, notes...)
	notesMu.Unlock()
	if e.logDir != "" {
		rep.problems = append(rep.problems, "the daemons' logs of this run are in "+e.logDir)
	}
	rep.elapsed = time.Since(rep.started)
	if err := writeResults(cfg.outDir, rep); err != nil {
		logf("writing results: %v", err)
		failed = true
	}
	if failed {
		return 1
	}
	return 0
}

// removeLeftovers removes what a failed scenario left, so the next
// scenario's cleanliness row shows only its own leaks.
func (e *env) removeLeftovers() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if ids, err := e.boxd.list(ctx); err == nil {
		if err := removeMany(ctx, e.boxd, ids, 8); err != nil {
			logf("removing leftovers: %v", err)
		}
	}
	if ids, err := e.docker.list(ctx); err == nil {
		if err := removeMany(ctx, e.docker, ids, 8); err != nil {
			logf("removing leftovers: %v", err)
		}
	}
}

// writeResults writes the tables first, so that nothing a chart does can
// lose them, then the charts, each under a time limit, then the tables
// again with the charts and whatever was left out of them.
func writeResults(dir string, rep *report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	write := func() error {
		return os.WriteFile(filepath.Join(dir, "latest.md"), []byte(rep.markdown()), 0o644)
	}
	if err := write(); err != nil {
		return err
	}
	charts := []struct {
		name string
		draw func(string) ([]string, error)
	}{
		{"latency.png", func(p string) ([]string, error) {
			return writeLatencyChart(p, latencyPanels(rep.lats, rep.bursts))
		}},
		{"concurrency.png", func(p string) ([]string, error) { return writeConcurrencyChart(p, rep.conc) }},
	}
	for _, c := range charts {
		path := filepath.Join(dir, c.name)
		_ = os.Remove(path) // never leave a chart of an earlier run
		omitted, err := drawWithin(chartTimeLimit, func() ([]string, error) { return c.draw(path) })
		for _, o := range omitted {
			rep.chartNotes = append(rep.chartNotes, fmt.Sprintf("%s leaves out %s: a value at or below zero, or not finite, has no place on its log scale", c.name, o))
		}
		if err != nil {
			rep.problems = append(rep.problems, fmt.Sprintf("chart %s: %v", c.name, err))
			_ = os.Remove(path)
			continue
		}
		if exists(path) {
			rep.charts = append(rep.charts, c.name)
		}
	}
	md := rep.markdown()
	fmt.Print(md)
	return os.WriteFile(filepath.Join(dir, "latest.md"), []byte(md), 0o644)
}

// chartTimeLimit bounds one chart's drawing; a chart that takes longer is
// reported as a problem and left out, and the run ends with its tables.
const chartTimeLimit = time.Minute

// drawWithin runs draw and gives up on it after limit. A drawing that
// never ends keeps its goroutine until the process exits, which it soon
// does: writing the results is the run's last step.
func drawWithin(limit time.Duration, draw func() ([]string, error)) ([]string, error) {
	type result struct {
		omitted []string
		err     error
	}
	done := make(chan result, 1)
	go func() {
		o, err := draw()
		done <- result{o, err}
	}()
	select {
	case r := <-done:
		return r.omitted, r.err
	case <-time.After(limit):
		return nil, fmt.Errorf("not drawn within %s", limit)
	}
}
