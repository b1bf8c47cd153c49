//go:build linux

package main

// Scenario 14: a cached rebuild of a small multi-step Dockerfile with
// boxctl build (target <= 1 s). One uncached build first, untimed, fills
// the step cache; then each sample is an unchanged rebuild, every step a
// cache lookup (no sandbox), timed whole: boxctl's start, sending the
// context, the lookups and writing the name. No peer: docker build is not
// driven by this bench.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

const buildBenchDockerfile = `FROM ` + image + `
ENV MODE=bench
WORKDIR /opt/app
COPY app/ ./
RUN cat a.txt > out.txt && echo "$MODE" >> out.txt
USER 1000
CMD ["cat", "out.txt"]
`

func scenarioBuild(ctx context.Context, e *env, cfg *config) (*latency, error) {
	dir := filepath.Join(e.dir, "build")
	if err := os.MkdirAll(filepath.Join(dir, "app"), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(buildBenchDockerfile), 0o644); err != nil {
		return nil, err
	}
	for i := range 20 {
		if err := os.WriteFile(filepath.Join(dir, "app", fmt.Sprintf("%c.txt", 'a'+i)), []byte(strings.Repeat("x", 4096)), 0o644); err != nil {
			return nil, err
		}
	}
	const ref = "bench/build:v1"
	defer func() { _ = run(e.boxctlCmd(context.WithoutCancel(ctx), "image", "rm", ref)) }()
	if out, err := e.boxctlCmd(ctx, "build", "--force", "-t", ref, dir).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("first build: %v %s", err, out)
	}
	return measure(ctx, "cached rebuild of a 6-step Dockerfile (boxctl build, all steps cached)", 1, max(cfg.n/5, 5), []peer{
		{name: "boxctl build (cached)", run: func(ctx context.Context, _ int) error {
			out, err := e.boxctlCmd(ctx, "build", "--force", "-t", ref, dir).CombinedOutput()
			if err != nil {
				return fmt.Errorf("%v %s", err, out)
			}
			if strings.Count(string(out), ": cached\n") != 6 {
				return fmt.Errorf("not every step was cached:\n%s", out)
			}
			return nil
		}},
	}), nil
}
