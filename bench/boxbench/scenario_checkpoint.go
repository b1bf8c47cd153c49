//go:build linux

package main

// Scenario checkpoint: a gVisor sandbox holding 256 MiB and 1 GiB of
// memory (random bytes in a tmpfs, which lives in the sandbox kernel's
// memory) checkpointed to disk and restored, side by side with what the
// same bytes cost elsewhere in the same round: dd writing them to the
// disk boxd's state is on (through the page cache, and with conv=fsync),
// and a pause and unpause of the same sandbox (which keeps its memory).
// Docker has no checkpoint here (it needs CRIU, which does not run on
// this kernel; see docs/checkpoint.md), so it is no peer. The third row is
// the first exec into a checkpointed --auto-resume sandbox, which
// restores it (what the caller of an idle-checkpointed sandbox waits).
// Targets (issue): checkpoint at most 1.2× dd, restore at most 300 ms for
// 256 MiB, the first exec after an idle checkpoint at most 500 ms.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"connectrpc.com/connect"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

func (b boxdAPI) checkpoint(ctx context.Context, id string) (int64, error) {
	r, err := b.c.CheckpointSandbox(ctx, connect.NewRequest(&boxdv1.CheckpointSandboxRequest{Id: id}))
	if err != nil {
		return 0, err
	}
	return r.Msg.Bytes, nil
}

func (b boxdAPI) restore(ctx context.Context, id string) error {
	_, err := b.c.RestoreSandbox(ctx, connect.NewRequest(&boxdv1.RestoreSandboxRequest{Id: id}))
	return err
}

// ckSandbox makes an auto-resume gVisor sandbox holding mib MiB of random
// bytes in its memory.
func (b boxdAPI) ckSandbox(ctx context.Context, mib int) (string, error) {
	r, err := b.c.CreateSandbox(ctx, connect.NewRequest(&boxdv1.CreateSandboxRequest{
		Labels: map[string]string{"boxbench": "1"}, Runtime: "gvisor", AutoResume: true,
		Limits: &boxdv1.Limits{Memory: strconv.Itoa(mib+256) + "m", Disk: "64m"},
		Tmpfs:  []string{"/dev/shm:" + strconv.Itoa(mib+16) + "m"},
	}))
	if err != nil {
		return "", err
	}
	id := r.Msg.Sandbox.Id
	if _, err := execOK(ctx, b, id, "sh", "-c", "head -c "+strconv.Itoa(mib<<20)+" /dev/urandom > /dev/shm/blob"); err != nil {
		_ = b.remove(context.WithoutCancel(ctx), id)
		return "", err
	}
	return id, nil
}

func scenarioCheckpoint(ctx context.Context, e *env, cfg *config) ([]*latency, error) {
	b := e.boxd
	sizes := []int{256, 1024}
	n := cfg.commitN
	if cfg.quick {
		sizes = []int{64}
	}
	var out []*latency
	for _, mib := range sizes {
		ls, err := checkpointRows(ctx, e, b, mib, cfg.warm, n)
		out = append(out, ls...)
		if err != nil {
			return out, err
		}
	}
	return out, ctx.Err()
}

// checkpointRows measures one size: checkpoint against dd and pause,
// restore against unpause, and the first exec of an auto-resume sandbox.
// The pause peers have a sandbox of their own, the same size: one sandbox
// cannot be checkpointed and paused at once, as the rounds interleave.
func checkpointRows(ctx context.Context, e *env, b boxdAPI, mib, warm, n int) ([]*latency, error) {
	var ids [2]string
	defer func() {
		for _, id := range ids {
			if id != "" {
				_ = b.remove(context.WithoutCancel(ctx), id)
			}
		}
	}()
	for k := range ids {
		id, err := b.ckSandbox(ctx, mib)
		if err != nil {
			return nil, fmt.Errorf("gvisor sandbox of %d MiB: %w", mib, err)
		}
		ids[k] = id
	}
	id, other := ids[0], ids[1]
	// One untimed round: warms runsc's pages and gives the size on disk.
	size, err := b.checkpoint(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	if err := b.restore(ctx, id); err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	logf("checkpoint of a gVisor sandbox holding %d MiB: %d MiB on disk (%.2f GiB per GiB held)", mib, size>>20, float64(size)/float64(int64(mib)<<20))
	ddFile := filepath.Join(e.stateDir, "boxbench-dd.bin")
	defer os.Remove(ddFile)
	dd := func(fsync bool) func(context.Context, int) error {
		return func(c context.Context, _ int) error {
			args := []string{"if=/dev/zero", "of=" + ddFile, "bs=1M", "count=" + strconv.Itoa(mib)}
			if fsync {
				args = append(args, "conv=fsync")
			}
			return run(exec.CommandContext(c, "dd", args...))
		}
	}
	rmDD := func(context.Context, int) error { return os.Remove(ddFile) }
	ck := func(c context.Context, _ int) error { _, err := b.checkpoint(c, id); return err }
	rs := func(c context.Context, _ int) error { return b.restore(c, id) }
	pause := func(c context.Context, _ int) error { return b.pause(c, other) }
	unpause := func(c context.Context, _ int) error { return b.unpause(c, other) }
	first := func(c context.Context, _ int) error { _, err := execOK(c, b, id, "true"); return err }
	what := fmt.Sprintf("a gVisor sandbox holding %d MiB (%d MiB on disk)", mib, size>>20)
	var out []*latency
	out = append(out, measure(ctx, "checkpoint "+what, warm, n, []peer{
		{name: "boxd checkpoint", run: ck, after: rs},
		{name: "dd to the same disk", run: dd(false), after: rmDD},
		{name: "dd conv=fsync", run: dd(true), after: rmDD},
		{name: "boxd pause", run: pause, after: unpause},
	}))
	if err := ck(ctx, 0); err != nil {
		return out, fmt.Errorf("checkpoint: %w", err)
	}
	if err := pause(ctx, 0); err != nil {
		return out, fmt.Errorf("pause: %w", err)
	}
	out = append(out, measure(ctx, "restore "+what, warm, n, []peer{
		{name: "boxd restore", run: rs, after: ck},
		{name: "boxd unpause", run: unpause, after: pause},
	}))
	// Each sample finds the sandbox checkpointed (the rows before left it
	// so) and checkpoints it again, untimed, after.
	out = append(out, measure(ctx, "first exec into a checkpointed --auto-resume sandbox, "+what, warm, n, []peer{
		{name: "boxd exec (restores)", run: first, after: ck},
	}))
	return out, ctx.Err()
}
