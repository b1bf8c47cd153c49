//go:build linux

// Room: images. Commit: a sandbox's writable layer into a new image.

package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"

	"github.com/boxd-dev/boxd/internal/layerdiff"
	"github.com/boxd-dev/boxd/snapshot"
)

// maxCommitMessage bounds a commit message (it goes into the image config).
const maxCommitMessage = 4096

// CommitRequest asks for an image made from a sandbox's files.
type CommitRequest struct {
	Sandbox string // id or name
	Ref     string // image name to write
	Message string
	Opts    snapshot.WriteOptions // Force, caller, users
}

// Commit makes an image from a sandbox: its image's layers, then its
// writable layer (and the fork layers under it) as new layers with the
// user-namespace shift undone, and the sandbox's env and workdir in the
// config. The sandbox is frozen while its files are read, then runs on.
// An existing name is refused unless req.Opts.Force; a failure leaves no
// image and no new content.
func (m *Manager) Commit(ctx context.Context, req CommitRequest) (snapshot.Image, error) {
	ctx = namespaces.WithNamespace(ctx, m.cfg.Namespace)
	if len(req.Message) > maxCommitMessage {
		return snapshot.Image{}, fieldErr("message", "%d bytes, at most %d allowed", len(req.Message), maxCommitMessage)
	}
	if req.Ref == "" {
		return snapshot.Image{}, fieldErr("ref", "the image name is empty")
	}
	if _, err := m.cfg.Images.CheckWritable(ctx, req.Ref, req.Opts); err != nil {
		if errdefs.IsInvalidArgument(err) {
			return snapshot.Image{}, fieldErr("ref", "%v", err)
		}
		return snapshot.Image{}, err
	}
	if err := layerdiff.CheckOverlay(); err != nil {
		return snapshot.Image{}, err
	}
	ctr, err := m.find(ctx, req.Sandbox)
	if err != nil {
		return snapshot.Image{}, err
	}
	id := ctr.ID()
	if m.isGvisor(id) {
		return snapshot.Image{}, gvRefuse("commit", gvNoHostLayer)
	}
	if !m.claimWait(ctx, id, 5*time.Second) {
		return snapshot.Image{}, fmt.Errorf("sandbox %s is being created, restarted or deleted: %w", id, errdefs.ErrConflict)
	}
	defer m.release(id)
	src, err := m.loadSource(ctx, ctr)
	if err != nil {
		return snapshot.Image{}, err
	}
	base, err := m.cfg.Images.BaseImage(ctx, src.rec.Image, src.rec.ImageDigest)
	if err != nil {
		return snapshot.Image{}, err
	}
	t0 := time.Now()
	var frozen time.Duration
	img, err := m.cfg.Images.Commit(ctx, snapshot.CommitSpec{
		Name: req.Ref, Base: base, Env: src.env, Workdir: src.rec.Workdir,
		Message: req.Message, CreatedBy: "boxctl commit " + id, Sandbox: id, Opts: req.Opts,
		Layers: m.commitLayers(ctr, src, &frozen),
	})
	if err != nil {
		return snapshot.Image{}, err
	}
	m.log.Info("committed", "sandbox", id, "image", img.Name, "digest", img.Digest, "layers", len(src.layers),
		"frozen", frozen.Round(time.Millisecond), "took", time.Since(t0).Round(time.Millisecond))
	return img, nil
}

// commitLayers adds a sandbox's layers above its image to a commit: the
// fork layers under its writable layer as tars (they never change), then
// the writable layer itself, copied into the new layer's snapshot with
// ownership unshifted, the sandbox frozen for that copy only (about 50 ms
// for 100 MiB, where writing and uploading the tar took over a second);
// the layer's tar is then written from the copy while the sandbox runs.
// frozen gets how long it was frozen.
func (m *Manager) commitLayers(ctr client.Container, src *source, frozen *time.Duration) func(context.Context, snapshot.LayerAdder) error {
	return func(ctx context.Context, add snapshot.LayerAdder) error {
		for _, l := range src.layers {
			if !l.active {
				if err := add.Tar(func(w io.Writer) error { return writeLayerDiff(ctx, src.sn, l, src.shift, w) }); err != nil {
					return err
				}
				continue
			}
			upper, cleanup, err := layerDir(ctx, src.sn, l)
			if err != nil {
				return err
			}
			err = add.Copy(func(dst string) error {
				t := time.Now()
				thaw, err := m.freezeChecked(ctx, ctr)
				if err != nil {
					return err
				}
				_, err = layerdiff.CopyUpper(ctx, dst, upper, src.shift, layerdiff.CopyOptions{TarTimes: true})
				thaw()
				*frozen = time.Since(t)
				return err
			})
			cleanup()
			if err != nil {
				return err
			}
		}
		return nil
	}
}

// source is what commit and fork read of a sandbox.
type source struct {
	rec    record
	env    []string
	sn     snapshots.Snapshotter
	layers []layerSrc
	shift  layerdiff.Shift
	key    string // its snapshot key
}

// loadSource reads a sandbox's record, environment, user-namespace
// mapping and the layers of its rootfs above its image.
func (m *Manager) loadSource(ctx context.Context, ctr client.Container) (*source, error) {
	info, err := ctr.Info(ctx, client.WithoutRefreshedMetadata)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", ctr.ID(), err)
	}
	var rec record
	if err := json.Unmarshal([]byte(info.Labels[LabelSandbox]), &rec); err != nil {
		return nil, fmt.Errorf("sandbox %s: corrupt %s label: %w", ctr.ID(), LabelSandbox, err)
	}
	spec, err := ctr.Spec(ctx)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: spec: %w", ctr.ID(), err)
	}
	shift, err := specShift(spec)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", ctr.ID(), err)
	}
	sn := m.cfg.Client.SnapshotService(info.Snapshotter)
	layers, err := rootfsLayers(ctx, sn, info.SnapshotKey)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", ctr.ID(), err)
	}
	return &source{rec: rec, env: commandEnv(spec), sn: sn, layers: layers, shift: shift, key: info.SnapshotKey}, nil
}

// freezeChecked freezes a sandbox and checks, while it holds still, that
// its rootfs holds nothing that would redirect runc when a sandbox starts
// on a copy of it (the check boxd makes before restarting a dead init):
// sandbox root must not be able to plant that in an image or a fork.
func (m *Manager) freezeChecked(ctx context.Context, ctr client.Container) (func(), error) {
	thaw, err := m.freeze(ctx, ctr)
	if err != nil {
		return nil, fmt.Errorf("freeze sandbox %s: %w", ctr.ID(), err)
	}
	problem, err := m.checkRootfs(ctx, ctr)
	if err == nil && problem != "" {
		err = fmt.Errorf("sandbox %s's files would redirect runc in a sandbox made from them (%s); refused: %w", ctr.ID(), problem, errdefs.ErrFailedPrecondition)
	}
	if err != nil {
		thaw()
		return nil, err
	}
	return thaw, nil
}
