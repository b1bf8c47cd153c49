//go:build linux

package main

// Scenario volumes: named volumes next to the sandbox's own writable
// layer and Docker's named volumes, in the same rounds.
//   - time to interactive (create + first command) with a volume mounted,
//     next to the same without one, and docker with a named volume;
//   - a clone of a 1 GiB volume holding bigMiB*9 MiB (CreateVolume
//     from it), removed untimed after each run (Docker has no clone);
//   - sequential write (dd conv=fsync) and read of 256 MiB inside a
//     volume, in the sandbox's writable layer, and in a docker named
//     volume and container layer. The host's page cache is dropped
//     (untimed) before each read, so reads come from the disk.

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/boxd-dev/boxd/internal/rpcclient"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

const benchVolume, benchVolumeFull, dockerBenchVolume = "bench-vol", "bench-vol-full", "boxbench-vol"

// volumeTTIPeer creates a sandbox mounting volume ro at /data, then asks
// it its first command.
func volumeTTIPeer(e *env, vol string) peer {
	var id string
	return peer{name: "boxd, a volume mounted", run: func(ctx context.Context, _ int) error {
		r, err := e.boxd.c.CreateSandbox(ctx, connect.NewRequest(&boxdv1.CreateSandboxRequest{
			Labels: map[string]string{"boxbench": "1"}, Volumes: []string{vol + ":/data:ro"}}))
		if err != nil {
			return err
		}
		id = r.Msg.Sandbox.Id
		_, err = execOK(ctx, e.boxd, id, ttiFirst...)
		return err
	}, after: func(ctx context.Context, _ int) error {
		if id == "" {
			return nil
		}
		err := e.boxd.remove(ctx, id)
		id = ""
		return err
	}}
}

// dockerVolumeCreate starts a container with the named volume at /data.
func dockerVolumeCreate(ctx context.Context, d *dockerAPI) (string, error) {
	body := map[string]any{
		"Image": d.image, "Cmd": []string{"sleep", "1000000000"}, "WorkingDir": "/workspace",
		"Labels": map[string]string{"boxbench": "1"},
		"HostConfig": map[string]any{"NetworkMode": "none", "Memory": d.memory, "MemorySwap": d.memory,
			"NanoCpus": d.nanoCPUs, "PidsLimit": d.pids, "Binds": []string{dockerBenchVolume + ":/data"}},
	}
	var out struct{ Id string }
	if err := d.do(ctx, http.MethodPost, "/containers/create", body, &out); err != nil {
		return "", err
	}
	if err := d.startContainer(ctx, out.Id); err != nil {
		_ = d.remove(context.WithoutCancel(ctx), out.Id)
		return "", err
	}
	return out.Id, nil
}

func dockerVolumeTTIPeer(e *env) peer {
	var id string
	return peer{name: "docker, a named volume mounted", run: func(ctx context.Context, _ int) error {
		var err error
		if id, err = dockerVolumeCreate(ctx, e.docker); err != nil {
			return err
		}
		_, err = execOK(ctx, e.docker, id, ttiFirst...)
		return err
	}, after: func(ctx context.Context, _ int) error {
		if id == "" {
			return nil
		}
		err := e.docker.remove(ctx, id)
		id = ""
		return err
	}}
}

func scenarioVolumes(ctx context.Context, e *env, cfg *config) ([]*latency, error) {
	vc := rpcclient.NewVolumes(e.sock)
	for _, v := range []struct {
		name, size string
	}{{benchVolume, "1g"}, {benchVolumeFull, "1g"}} {
		if _, err := vc.CreateVolume(ctx, connect.NewRequest(&boxdv1.CreateVolumeRequest{Name: v.name, Size: v.size})); err != nil {
			return nil, fmt.Errorf("create volume %s: %w", v.name, err)
		}
		defer vc.RemoveVolume(context.WithoutCancel(ctx), connect.NewRequest(&boxdv1.RemoveVolumeRequest{Name: v.name, Force: true}))
	}
	if err := e.docker.do(ctx, http.MethodPost, "/volumes/create", map[string]any{"Name": dockerBenchVolume}, nil); err != nil {
		return nil, fmt.Errorf("docker volume create: %w", err)
	}
	defer e.docker.do(context.WithoutCancel(ctx), http.MethodDelete, "/volumes/"+dockerBenchVolume+"?force=1", nil, nil)

	tti := measure(ctx, "time to interactive with a volume mounted (target: at most 10 ms more)", cfg.warm, cfg.ttiN,
		[]peer{volumeTTIPeer(e, benchVolume), ttiPeer(e.boxd), dockerVolumeTTIPeer(e)})
	clone, err := volumeClone(ctx, e, cfg, vc)
	if err != nil {
		return []*latency{tti}, err
	}
	io, err := volumeIO(ctx, e, cfg)
	return append([]*latency{tti, clone}, io...), err
}

// volumeClone fills bench-vol-full through a sandbox and times clones of
// it.
func volumeClone(ctx context.Context, e *env, cfg *config, vc interface {
	CreateVolume(context.Context, *connect.Request[boxdv1.CreateVolumeRequest]) (*connect.Response[boxdv1.CreateVolumeResponse], error)
	RemoveVolume(context.Context, *connect.Request[boxdv1.RemoveVolumeRequest]) (*connect.Response[boxdv1.RemoveVolumeResponse], error)
}) (*latency, error) {
	const fillMiB = 900
	r, err := e.boxd.c.CreateSandbox(ctx, connect.NewRequest(&boxdv1.CreateSandboxRequest{
		Labels: map[string]string{"boxbench": "1"}, Volumes: []string{benchVolumeFull + ":/data"}}))
	if err != nil {
		return nil, fmt.Errorf("create a sandbox on %s: %w", benchVolumeFull, err)
	}
	id := r.Msg.Sandbox.Id
	if _, err := execOK(ctx, e.boxd, id, "dd", "if=/dev/urandom", "of=/data/big", "bs=1M", fmt.Sprintf("count=%d", fillMiB), "conv=fsync"); err != nil {
		e.boxd.remove(context.WithoutCancel(ctx), id)
		return nil, fmt.Errorf("fill %s: %w", benchVolumeFull, err)
	}
	if err := e.boxd.remove(ctx, id); err != nil {
		return nil, err
	}
	p := peer{name: fmt.Sprintf("boxd volume create --from (%d MiB used)", fillMiB), run: func(ctx context.Context, i int) error {
		_, err := vc.CreateVolume(ctx, connect.NewRequest(&boxdv1.CreateVolumeRequest{Name: fmt.Sprintf("bench-clone-%d", i), From: benchVolumeFull}))
		return err
	}, after: func(ctx context.Context, i int) error {
		_, err := vc.RemoveVolume(ctx, connect.NewRequest(&boxdv1.RemoveVolumeRequest{Name: fmt.Sprintf("bench-clone-%d", i)}))
		return err
	}}
	return measure(ctx, "clone of a 1 GiB volume (target: at most 1 s)", cfg.warm, cfg.commitN, []peer{p}), nil
}

// volumeIO times dd writes and reads of 256 MiB in four places, the
// peers interleaved in each round.
func volumeIO(ctx context.Context, e *env, cfg *config) ([]*latency, error) {
	type place struct {
		name string
		api  sandboxAPI
		id   string
		dir  string
	}
	bv, err := e.boxd.c.CreateSandbox(ctx, connect.NewRequest(&boxdv1.CreateSandboxRequest{
		Labels: map[string]string{"boxbench": "1"}, Volumes: []string{benchVolume + ":/data"}}))
	if err != nil {
		return nil, fmt.Errorf("create a sandbox on %s: %w", benchVolume, err)
	}
	bid := bv.Msg.Sandbox.Id
	defer e.boxd.remove(context.WithoutCancel(ctx), bid)
	did, err := dockerVolumeCreate(ctx, e.docker)
	if err != nil {
		return nil, fmt.Errorf("docker create with a volume: %w", err)
	}
	defer e.docker.remove(context.WithoutCancel(ctx), did)
	places := []place{{"boxd volume", e.boxd, bid, "/data"}, {"boxd writable layer", e.boxd, bid, "/workspace"},
		{"docker named volume", e.docker, did, "/data"}, {"docker container layer", e.docker, did, "/workspace"}}
	mk := func(what string) *latency {
		l := &latency{scenario: what, samples: map[string][]time.Duration{}, errors: map[string]int{}, firstErr: map[string]string{}}
		for _, p := range places {
			l.peers = append(l.peers, p.name)
		}
		return l
	}
	wl := mk("sequential write of 256 MiB (dd conv=fsync; target: volume within 10% of the writable layer)")
	rl := mk("sequential read of 256 MiB, page cache dropped (target: volume within 10% of the writable layer)")
	record := func(l *latency, name string, d time.Duration, err error) {
		if err != nil {
			l.errors[name]++
			if l.firstErr[name] == "" {
				l.firstErr[name] = err.Error()
			}
			return
		}
		l.samples[name] = append(l.samples[name], d)
	}
	logf("volume I/O: %d warm-up + %d rounds of %d places", cfg.warm, cfg.commitN, len(places))
	for i := -cfg.warm; i < cfg.commitN && ctx.Err() == nil; i++ {
		for k := range places {
			p := places[(k+max(i, 0))%len(places)]
			f := p.dir + "/bench-io"
			t0 := time.Now()
			_, err := execOK(ctx, p.api, p.id, "dd", "if=/dev/zero", "of="+f, "bs=1M", "count=256", "conv=fsync")
			dw := time.Since(t0)
			_ = os.WriteFile("/proc/sys/vm/drop_caches", []byte("1"), 0) // untimed: reads come from the disk
			t0 = time.Now()
			_, rerr := execOK(ctx, p.api, p.id, "dd", "if="+f, "of=/dev/null", "bs=1M")
			dr := time.Since(t0)
			_, _ = execOK(ctx, p.api, p.id, "rm", "-f", f)
			if i >= 0 {
				record(wl, p.name, dw, err)
				record(rl, p.name, dr, rerr)
			}
		}
	}
	for _, l := range []*latency{wl, rl} {
		var parts []string
		for _, p := range l.peers {
			parts = append(parts, p+" "+ms(quantile(l.samples[p], 0.5)))
		}
		logf("%s: %s", l.scenario, strings.Join(parts, ", "))
	}
	return []*latency{wl, rl}, ctx.Err()
}
