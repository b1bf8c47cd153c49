//go:build linux

package main

// Scenario 17: what changed. A sandbox made from an image of 50,000
// small files (committed by boxd from a sandbox that wrote them,
// untimed) changes 1,000 of them, then DiffSandbox
// lists its changes, without and with patches (target: at most 100 ms
// without); the peer is the walk diff avoids: `find` over the whole tree
// inside the sandbox for files newer than a stamp.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"connectrpc.com/connect"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

const (
	diffImage   = "bench/diff-files:latest"
	diffFiles   = 50_000
	diffChanged = 1_000
)

// diffFilesScript writes files small files in 50 directories under /data.
func diffFilesScript(files, changed int) (write, change string) {
	per := files / 50
	write = fmt.Sprintf(`set -e; mkdir /data; cd /data; for d in $(seq 0 49); do mkdir $d; i=0; while [ $i -lt %d ]; do echo "line $i" > $d/f$i; i=$((i+1)); done; done`, per)
	change = fmt.Sprintf(`set -e; touch /stamp; sleep 1; for d in $(seq 0 49); do i=0; while [ $i -lt %d ]; do echo changed >> /data/$d/f$i; i=$((i+1)); done; done`, changed/50)
	return write, change
}

func scenarioDiff(ctx context.Context, e *env, cfg *config) ([]*latency, error) {
	write, change := diffFilesScript(diffFiles, diffChanged)
	src, err := e.boxd.create(ctx)
	if err != nil {
		return nil, fmt.Errorf("boxd create: %w", err)
	}
	t0 := time.Now()
	_, err = execOK(ctx, e.boxd, src, "sh", "-c", write)
	if err == nil {
		_, err = e.boxd.c.CommitSandbox(ctx, connect.NewRequest(&boxdv1.CommitSandboxRequest{SandboxId: src, Ref: diffImage, Force: true}))
	}
	rerr := e.boxd.remove(context.WithoutCancel(ctx), src)
	if err != nil || rerr != nil {
		return nil, fmt.Errorf("boxd: an image of %d files: %w", diffFiles, errors.Join(err, rerr))
	}
	defer e.boxd.c.RemoveImage(context.WithoutCancel(ctx), connect.NewRequest(&boxdv1.RemoveImageRequest{Name: diffImage, Force: true}))
	logf("diff: an image of %d files made in %s", diffFiles, time.Since(t0).Round(time.Millisecond))
	r, err := e.boxd.c.CreateSandbox(ctx, connect.NewRequest(&boxdv1.CreateSandboxRequest{Image: diffImage, Labels: map[string]string{"boxbench": "1"}}))
	if err != nil {
		return nil, fmt.Errorf("boxd create from %s: %w", diffImage, err)
	}
	sb := r.Msg.Sandbox.Id
	defer e.boxd.remove(context.WithoutCancel(ctx), sb)
	if _, err := execOK(ctx, e.boxd, sb, "sh", "-c", change); err != nil {
		return nil, fmt.Errorf("boxd: change %d files: %w", diffChanged, err)
	}
	// /stamp and the changed files.
	want := diffChanged + 1
	diffPeer := func(name string, patch bool) peer {
		return peer{name: name, run: func(ctx context.Context, _ int) error {
			s, err := e.boxd.c.DiffSandbox(ctx, connect.NewRequest(&boxdv1.DiffSandboxRequest{SandboxId: sb, Patch: patch}))
			if err != nil {
				return err
			}
			defer s.Close()
			n := 0
			for s.Receive() {
				n += len(s.Msg().Entries)
			}
			if err := s.Err(); err != nil {
				return err
			}
			if n != want {
				return fmt.Errorf("%d changes listed, want %d", n, want)
			}
			return nil
		}}
	}
	peers := []peer{
		diffPeer("boxd DiffSandbox", false),
		diffPeer("boxd DiffSandbox with patches", true),
		{name: "find -newer over the tree, in the sandbox", run: func(ctx context.Context, _ int) error {
			out, err := execOK(ctx, e.boxd, sb, "sh", "-c", "find /data -type f -newer /stamp | wc -l")
			if err == nil && string(out) != strconv.Itoa(diffChanged)+"\n" {
				err = fmt.Errorf("find counted %q files", out)
			}
			return err
		}},
	}
	title := fmt.Sprintf("diff of a sandbox that changed %d of %d files (target: at most 100 ms)", diffChanged, diffFiles)
	l := measure(ctx, title, cfg.warm, cfg.n, peers)
	for _, p := range peers {
		logf("%s: %s median %s", title, p.name, ms(quantile(l.samples[p.name], 0.5)))
	}
	return []*latency{l}, ctx.Err()
}
