//go:build linux

package main

// Scenario 4: moving files, CLI against CLI: `boxctl cp` and `docker cp`.
// One big incompressible file in and out, and a tree of many small files
// in (a source checkout is mostly small files).

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
)

func scenarioFiles(ctx context.Context, e *env, cfg *config) ([]*latency, error) {
	dir := filepath.Join(e.dir, "files")
	big := filepath.Join(dir, "big.bin")
	tree := filepath.Join(dir, "tree")
	outDir := filepath.Join(dir, "out")
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bigSize := int64(cfg.bigMiB) << 20
	if err := writeRandom(big, bigSize); err != nil {
		return nil, err
	}
	if err := writeTree(tree, cfg.treeFiles); err != nil {
		return nil, err
	}

	sb, err := e.boxd.create(ctx)
	if err != nil {
		return nil, fmt.Errorf("boxd create: %w", err)
	}
	defer e.boxd.remove(context.WithoutCancel(ctx), sb)
	dk, err := e.docker.create(ctx)
	if err != nil {
		return nil, fmt.Errorf("docker create: %w", err)
	}
	defer e.docker.remove(context.WithoutCancel(ctx), dk)

	// rmIn removes what a copy-in made, untimed, so every sample writes
	// into the same empty directory.
	rmIn := func(api sandboxAPI, id, path string) func(context.Context, int) error {
		return func(ctx context.Context, _ int) error {
			_, err := execOK(ctx, api, id, "rm", "-rf", path)
			return err
		}
	}
	var rs []*latency
	bigName := fmt.Sprintf("%d MiB file", cfg.bigMiB)
	rs = append(rs, measure(ctx, bigName+" in", 1, cfg.bigN, []peer{
		{name: "boxctl cp", run: func(ctx context.Context, _ int) error {
			return run(e.boxctlCmd(ctx, "cp", big, sb+":/workspace/big.bin"))
		}, after: rmIn(e.boxd, sb, "/workspace/big.bin")},
		{name: "docker cp", run: func(ctx context.Context, _ int) error {
			return run(e.dockerCmd(ctx, "cp", big, dk+":/workspace/big.bin"))
		}, after: rmIn(e.docker, dk, "/workspace/big.bin")},
	}))

	// The file to copy out, put in place once.
	if err := run(e.boxctlCmd(ctx, "cp", big, sb+":/workspace/big.bin")); err != nil {
		return rs, err
	}
	if err := run(e.dockerCmd(ctx, "cp", big, dk+":/workspace/big.bin")); err != nil {
		return rs, err
	}
	// checkOut verifies the copy's size (a truncated copy is an error) and
	// removes it, untimed.
	checkOut := func(path string) func(context.Context, int) error {
		return func(context.Context, int) error {
			defer os.Remove(path)
			st, err := os.Stat(path)
			if err != nil {
				return err
			}
			if st.Size() != bigSize {
				return fmt.Errorf("%s: %d bytes, want %d", path, st.Size(), bigSize)
			}
			return nil
		}
	}
	boxdOut, dockerOut := filepath.Join(outDir, "boxd.bin"), filepath.Join(outDir, "docker.bin")
	rs = append(rs, measure(ctx, bigName+" out", 1, cfg.bigN, []peer{
		{name: "boxctl cp", run: func(ctx context.Context, _ int) error {
			return run(e.boxctlCmd(ctx, "cp", sb+":/workspace/big.bin", boxdOut))
		}, after: checkOut(boxdOut)},
		{name: "docker cp", run: func(ctx context.Context, _ int) error {
			return run(e.dockerCmd(ctx, "cp", dk+":/workspace/big.bin", dockerOut))
		}, after: checkOut(dockerOut)},
	}))

	// checkTree verifies the tree arrived whole before removing it.
	checkTree := func(api sandboxAPI, id string) func(context.Context, int) error {
		return func(ctx context.Context, i int) error {
			if i == 0 {
				out, err := execOK(ctx, api, id, "sh", "-c", "find /workspace/tree -type f | wc -l")
				if err != nil {
					return err
				}
				if strings.TrimSpace(string(out)) != fmt.Sprint(cfg.treeFiles) {
					return fmt.Errorf("%s: %s files arrived, want %d", api.name(), strings.TrimSpace(string(out)), cfg.treeFiles)
				}
			}
			return rmIn(api, id, "/workspace/tree")(ctx, i)
		}
	}
	rs = append(rs, measure(ctx, fmt.Sprintf("tree of %d small files in", cfg.treeFiles), 1, cfg.treeN, []peer{
		{name: "boxctl cp", run: func(ctx context.Context, _ int) error {
			return run(e.boxctlCmd(ctx, "cp", tree, sb+":/workspace/"))
		}, after: checkTree(e.boxd, sb)},
		{name: "docker cp", run: func(ctx context.Context, _ int) error {
			return run(e.dockerCmd(ctx, "cp", tree, dk+":/workspace/"))
		}, after: checkTree(e.docker, dk)},
	}))
	return rs, ctx.Err()
}

// writeRandom writes size bytes of incompressible data.
func writeRandom(path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	rng := rand.NewChaCha8([32]byte{'b', 'o', 'x', 'd'})
	buf := make([]byte, 1<<20)
	for left := size; left > 0; left -= int64(len(buf)) {
		_, _ = rng.Read(buf)
		if _, err := f.Write(buf[:min(int64(len(buf)), left)]); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// writeTree writes n small files (100 B to 8 KiB, like source files) in
// directories of ten, two levels deep.
func writeTree(root string, n int) error {
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 8<<10)
	for i := 0; i < n; i++ {
		d := filepath.Join(root, fmt.Sprintf("d%02d", i/100), fmt.Sprintf("s%d", i/10%10))
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		size := 100 + rng.IntN(len(buf)-100)
		for j := range size {
			buf[j] = byte('a' + rng.IntN(26))
		}
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%d.txt", i%10)), buf[:size], 0o644); err != nil {
			return err
		}
	}
	return nil
}
