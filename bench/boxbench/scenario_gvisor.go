//go:build linux

package main

// Scenario gvisor: runc and gVisor sandboxes of the same boxd side by side,
// next to Docker: time to interactive, exec round trip, file throughput
// through the API, and host memory per idle sandbox. gVisor's target is a
// time to interactive at most twice runc's.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/boxd-dev/boxd/internal/rpcclient"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

func scenarioGvisor(ctx context.Context, e *env, cfg *config) ([]*latency, []densityPoint, error) {
	runc := boxdAPI{c: e.boxd.c, runtime: "runc", label: "boxd runc"}
	gv := boxdAPI{c: e.boxd.c, runtime: "gvisor", label: "gVisor (boxd)"}
	apis := []sandboxAPI{runc, gv, e.docker}

	var rs []*latency
	rs = append(rs, measure(ctx, "runc vs gVisor: time to interactive (create + first command)", cfg.warm, cfg.ttiN,
		[]peer{ttiPeer(runc), ttiPeer(gv), ttiPeer(e.docker)}))
	if ctx.Err() != nil {
		return rs, nil, ctx.Err()
	}
	pooled, err := gvisorPooled(ctx, e, cfg)
	if pooled != nil {
		rs = append(rs, pooled)
	}
	if err != nil {
		return rs, nil, err
	}

	ids := make([]string, len(apis))
	defer func() {
		for k, id := range ids {
			if id != "" {
				_ = apis[k].remove(context.WithoutCancel(ctx), id)
			}
		}
	}()
	for k, api := range apis {
		id, err := api.create(ctx)
		if err != nil {
			return rs, nil, fmt.Errorf("%s create: %w", api.name(), err)
		}
		ids[k] = id
	}
	var execPeers []peer
	for k, api := range apis {
		execPeers = append(execPeers, peer{name: api.name(), run: func(ctx context.Context, _ int) error {
			_, err := execOK(ctx, api, ids[k], "true")
			return err
		}})
	}
	rs = append(rs, measure(ctx, "runc vs gVisor: exec `true` through the API", cfg.warm, cfg.apiN, execPeers))

	// File throughput through the API.
	dir := filepath.Join(e.dir, "gvisor-files")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return rs, nil, err
	}
	defer os.RemoveAll(dir)
	big := filepath.Join(dir, "big.bin")
	bigSize := int64(cfg.bigMiB) << 20
	if err := writeRandom(big, bigSize); err != nil {
		return rs, nil, err
	}
	fc := rpcclient.NewFiles(e.sock)
	rm := func(k int) func(context.Context, int) error {
		return func(ctx context.Context, _ int) error {
			_, err := execOK(ctx, apis[k], ids[k], "rm", "-f", "/workspace/big.bin")
			return err
		}
	}
	bigName := fmt.Sprintf("runc vs gVisor: %d MiB file", cfg.bigMiB)
	in := measure(ctx, bigName+" in (API)", 1, cfg.bigN, []peer{
		{name: runc.name(), run: func(ctx context.Context, _ int) error {
			return boxdWriteFile(ctx, fc, ids[0], "/workspace/big.bin", big)
		}, after: rm(0)},
		{name: gv.name(), run: func(ctx context.Context, _ int) error {
			return boxdWriteFile(ctx, fc, ids[1], "/workspace/big.bin", big)
		}, after: rm(1)},
		{name: "Docker Engine API", run: func(ctx context.Context, _ int) error {
			return e.docker.putFile(ctx, ids[2], "/workspace", big)
		}, after: rm(2)},
	})
	logThroughput(in, bigSize)
	rs = append(rs, in)
	for k := range apis[:2] {
		if err := boxdWriteFile(ctx, fc, ids[k], "/workspace/big.bin", big); err != nil {
			return rs, nil, err
		}
	}
	if err := e.docker.putFile(ctx, ids[2], "/workspace", big); err != nil {
		return rs, nil, err
	}
	out := filepath.Join(dir, "out.bin")
	check := func(context.Context, int) error {
		defer os.Remove(out)
		st, err := os.Stat(out)
		if err != nil {
			return err
		}
		if st.Size() != bigSize {
			return fmt.Errorf("%s: %d bytes, want %d", out, st.Size(), bigSize)
		}
		return nil
	}
	outL := measure(ctx, bigName+" out (API)", 1, cfg.bigN, []peer{
		{name: runc.name(), run: func(ctx context.Context, _ int) error {
			return boxdReadFile(ctx, fc, ids[0], "/workspace/big.bin", out)
		}, after: check},
		{name: gv.name(), run: func(ctx context.Context, _ int) error {
			return boxdReadFile(ctx, fc, ids[1], "/workspace/big.bin", out)
		}, after: check},
		{name: "Docker Engine API", run: func(ctx context.Context, _ int) error {
			return e.docker.getFile(ctx, ids[2], "/workspace/big.bin", out)
		}, after: check},
	})
	logThroughput(outL, bigSize)
	rs = append(rs, outL)
	for k, id := range ids {
		if err := apis[k].remove(context.WithoutCancel(ctx), id); err != nil {
			return rs, nil, err
		}
		ids[k] = ""
	}
	if ctx.Err() != nil {
		return rs, nil, ctx.Err()
	}
	ds, err := gvisorDensity(ctx, e, cfg, apis)
	return rs, ds, err
}

// gvisorDensity measures the host memory of n idle sandboxes of each peer
// in turn, each from none (as scenario density does).
func gvisorDensity(ctx context.Context, e *env, cfg *config, apis []sandboxAPI) ([]densityPoint, error) {
	ctrdPid := 0
	if data, err := os.ReadFile(filepath.Join(e.ctrd.Dir, "containerd.pid")); err == nil {
		ctrdPid, _ = strconv.Atoi(strings.TrimSpace(string(data)))
	}
	levels := append([]int(nil), cfg.density...)
	sort.Ints(levels)
	n := min(levels[0], 10)
	var out []densityPoint
	for k, api := range apis {
		ns, daemon := namespace, e.boxdProc.pid()
		if k == len(apis)-1 { // docker's
			ns, daemon = dockerNamespace, e.dockerdProc.pid()
		}
		settle()
		base := e.densitySnapshot(ns, daemon, ctrdPid)
		logf("gvisor density: %s, %d idle sandboxes", api.name(), n)
		ids, err := createMany(ctx, api, n, 4)
		if err != nil {
			_ = removeMany(context.WithoutCancel(ctx), api, ids, 8)
			return out, err
		}
		settle()
		m := e.densitySnapshot(ns, daemon, ctrdPid)
		p := densityPoint{
			peer: api.name(), n: n,
			shims: m.shims, sandboxes: m.sandboxes,
			daemon: m.daemon - base.daemon, containerd: m.containerd - base.containerd,
			used: m.used - base.used,
		}
		logf("gvisor density: %s %d: %d KiB PSS, %d KiB meminfo per sandbox", p.peer, n, p.pss()/int64(n), p.used/int64(n))
		out = append(out, p)
		if err := removeMany(context.WithoutCancel(ctx), api, ids, 8); err != nil {
			return out, err
		}
	}
	return out, nil
}

// gvisorPoolSize is each runtime's warm pool in the pooled row.
const gvisorPoolSize = 2

// gvisorPooled is the pooled row: time to interactive of creates served
// by a warm-pool member, runc's and gVisor's side by side, each sample
// with both pools full (the refills are waited for, untimed). With
// BENCH_AB the base build's gVisor create joins the same rounds: the
// same request, which the base serves as it can (main: always cold).
func gvisorPooled(ctx context.Context, e *env, cfg *config) (*latency, error) {
	set := func(ctx context.Context, n int) error {
		pools := rpcclient.NewPool(e.sock)
		for _, rt := range []string{"runc", "gvisor"} {
			if _, err := pools.SetPoolSize(ctx, connect.NewRequest(&boxdv1.SetPoolSizeRequest{Size: int32(n), Runtime: rt})); err != nil {
				return fmt.Errorf("set the %s pool to %d: %w", rt, n, err)
			}
		}
		return e.waitPool(ctx, 2*n, 5*time.Minute)
	}
	if err := set(ctx, gvisorPoolSize); err != nil {
		return nil, err
	}
	full := func(p peer) peer {
		after := p.after
		p.after = func(ctx context.Context, i int) error {
			if err := after(ctx, i); err != nil {
				return err
			}
			return e.waitPool(ctx, 2*gvisorPoolSize, 2*time.Minute)
		}
		return p
	}
	peers := []peer{
		full(ttiPeer(boxdAPI{c: e.boxd.c, runtime: "runc", label: "boxd runc, from the warm pool"})),
		full(ttiPeer(boxdAPI{c: e.boxd.c, runtime: "gvisor", label: "gVisor (boxd), from the warm pool"})),
	}
	ab, err := startAB(ctx, e)
	if err != nil {
		return nil, errors.Join(err, set(context.WithoutCancel(ctx), 0))
	}
	if ab != nil {
		peers = append(peers, ttiPeer(boxdAPI{c: ab.api.c, runtime: "gvisor", label: "gVisor (boxd), base build"}))
	}
	l := measure(ctx, "runc vs gVisor: time to interactive from the warm pool (create + first command)", cfg.warm, cfg.ttiN, peers)
	err = set(context.WithoutCancel(ctx), 0)
	if werr := e.waitNoMembers(context.WithoutCancel(ctx), namespace, 2*time.Minute); err == nil {
		err = werr
	}
	if serr := ab.stop(); serr != nil && err == nil {
		err = fmt.Errorf("A/B: stop base boxd: %w", serr)
	}
	return l, err
}
