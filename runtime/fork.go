//go:build linux

// Room: images. Fork: copies of a running sandbox on one shared layer
// of its files.

package runtime

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/boxd-dev/boxd/internal/layerdiff"
)

// MaxForks bounds how many sandboxes one fork call makes.
const MaxForks = 64

// ForkRequest asks for copies of a running sandbox. Unset fields take the
// source's values (TTL: the daemon's default); Env entries are added to
// the source's environment, Labels to its labels.
type ForkRequest struct {
	Source  string // id or name
	Count   int    // 0: len(Names), or 1
	Names   []string
	Memory  string
	CPUs    float64
	Pids    int64
	Env     []string
	Workdir string
	Labels  map[string]string
	TTL     string
	// The source's volumes: mounted read-only by each fork unless
	// CloneVolumes (each fork gets a clone of each, charged to the
	// caller) or ShareVolumes (mounted as the source mounts them; only
	// volumes created shared).
	CloneVolumes bool
	ShareVolumes bool
	// WithProcesses asks for forks that continue the source's processes:
	// refused, naming why (checkpoint_fork.go).
	WithProcesses bool
}

// Fork makes N sandboxes whose files start as a copy of a running
// sandbox's at one moment: the source is frozen while its writable layer
// is copied, once, into a new committed snapshot (a fork layer, ownership
// unshifted), and each fork gets its own writable layer on it. Processes
// are not copied: each fork starts with a fresh init. A failure leaves no
// fork and no fork layer.
func (m *Manager) Fork(ctx context.Context, req ForkRequest) ([]*Sandbox, error) {
	t0 := time.Now()
	ctx = namespaces.WithNamespace(ctx, m.cfg.Namespace)
	count, err := forkCount(req)
	if err != nil {
		return nil, err
	}
	if req.WithProcesses {
		return m.forkWithProcesses(ctx, req)
	}
	return m.forkFiles(ctx, t0, req, count)
}

// forkFiles is Fork of the source's files, with fresh inits.
func (m *Manager) forkFiles(ctx context.Context, t0 time.Time, req ForkRequest, count int) (_ []*Sandbox, retErr error) {
	if err := layerdiff.CheckOverlay(); err != nil {
		return nil, err
	}
	ctr, sb, err := m.forkSource(ctx, req.Source)
	if err != nil {
		return nil, err
	}
	srcID := ctr.ID()
	if err := refuseForkBinds(req.Source, sb); err != nil {
		return nil, err
	}
	rs, err := m.forkRequests(req, sb, count)
	if err != nil {
		return nil, err
	}
	// The forks are the caller's, within its quotas, as a create's are.
	owner := ownerUID(ctx)
	unreserve, err := m.reserveForks(ctx, owner, rs)
	defer unreserve()
	if err != nil {
		return nil, err
	}
	if err := m.checkRemapIDs(ctx); err != nil {
		return nil, err
	}
	undoVolumes, err := m.forkVolumes(ctx, req, sb, rs)
	defer undoVolumes(&retErr)
	if err != nil {
		return nil, err
	}

	if !m.claimWait(ctx, srcID, 5*time.Second) {
		return nil, fmt.Errorf("sandbox %s is being created, restarted or deleted: %w", srcID, errdefs.ErrConflict)
	}
	released := false
	release := func() {
		if !released {
			released = true
			m.release(srcID)
		}
	}
	defer release()
	src, err := m.loadSource(ctx, ctr)
	if err != nil {
		return nil, err
	}
	// The lease keeps the fork layer until the forks' snapshots sit on it.
	lctx, done, err := m.cfg.Client.WithLease(ctx)
	if err != nil {
		return nil, fmt.Errorf("fork %s: lease: %w", srcID, err)
	}
	defer done(context.WithoutCancel(lctx))
	cctx := context.WithoutCancel(lctx)

	active := src.layers[len(src.layers)-1]
	base, charge, frozen, err := m.forkLayer(lctx, ctr, src, active)
	if err != nil {
		return nil, fmt.Errorf("fork %s: %w", srcID, err)
	}
	release() // the source runs on; the forks need only the fork layer
	defer func() {
		if retErr != nil {
			m.pruneForkLayers(cctx, src.sn, base)
		}
	}()
	// The new layer, and those under it that the source's deletion would
	// no longer release, count against the owner's disk until the last
	// fork on them is deleted.
	chain, err := forkChain(lctx, src, LayerCharge{Key: base, Bytes: charge})
	if err != nil {
		return nil, fmt.Errorf("fork %s: %w", srcID, err)
	}
	releaseLayers, err := m.reserveLayers(owner, chain)
	if err != nil {
		return nil, fmt.Errorf("fork %s: %w", srcID, err)
	}
	defer releaseLayers()

	img, imgSpec := m.forkImage(src)
	for i := range rs {
		rs[i].forkParent, rs[i].forkLayers = base, chain
	}
	out, err := m.createForks(lctx, t0, srcID, rs, img, imgSpec)
	if err != nil {
		return nil, err
	}
	ids := m.forksCreated(out)
	m.log.Info("forked", "sandbox", srcID, "forks", ids, "frozen", frozen.Round(time.Millisecond), "took", time.Since(t0).Round(time.Millisecond))
	return out, nil
}

// forksCreated records each fork as a create does (a new sandbox to an
// events consumer too) and returns their ids.
func (m *Manager) forksCreated(out []*Sandbox) []string {
	ids := make([]string, len(out))
	for i, sb := range out {
		ids[i] = sb.ID
		m.created(sb.ID)
	}
	return ids
}

// forkSource finds the sandbox a fork copies: a running (or paused) runc
// sandbox the caller may use.
func (m *Manager) forkSource(ctx context.Context, source string) (client.Container, *Sandbox, error) {
	ctr, err := m.find(ctx, source)
	if err != nil {
		return nil, nil, err
	}
	srcID := ctr.ID()
	if m.isGvisor(srcID) {
		return nil, nil, gvRefuse("fork", gvNoHostLayer)
	}
	sb, err := m.describe(ctx, ctr, true)
	if err != nil {
		return nil, nil, err
	}
	if sb.State != string(client.Running) && sb.State != string(client.Paused) {
		return nil, nil, fmt.Errorf("sandbox %s is %s: fork copies a running sandbox (start a new one, or commit it and create from the image): %w", srcID, sb.State, errdefs.ErrFailedPrecondition)
	}
	return ctr, sb, nil
}

// forkImage is the image the forks are made from: the source's, as it
// was when the source was made, with the source's whole environment
// standing in for the image's (the request's entries come after it).
func (m *Manager) forkImage(src *source) (client.Image, ocispec.Image) {
	img := client.NewImageWithPlatform(m.cfg.Client, images.Image{
		Name:   src.rec.Image,
		Target: ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.Digest(src.rec.ImageDigest)},
	}, nil)
	var imgSpec ocispec.Image
	imgSpec.Config.Env = src.env
	return img, imgSpec
}

// forkCount is how many forks req asks for, checked against its names.
func forkCount(req ForkRequest) (int, error) {
	count := req.Count
	switch {
	case count < 0:
		return 0, fieldErr("count", "%d must be positive", count)
	case count == 0 && len(req.Names) > 0:
		count = len(req.Names)
	case count == 0:
		count = 1
	}
	if count > MaxForks {
		return 0, fieldErr("count", "%d is above the maximum of %d", count, MaxForks)
	}
	if len(req.Names) > 0 && len(req.Names) != count {
		return 0, fieldErr("names", "%d names for %d forks; give one name per fork or none", len(req.Names), count)
	}
	return count, nil
}

// reserveForks makes owner the owner of every fork in rs, holds their
// quota shares and claims their names as a create claims one. The
// returned release lets go of all that, whatever the error.
func (m *Manager) reserveForks(ctx context.Context, owner uint32, rs []resolved) (release func(), _ error) {
	var undo []func()
	release = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	for i := range rs {
		rs[i].owner = owner
		rel, err := m.reserveQuota(rs[i])
		if err != nil {
			return release, err
		}
		undo = append(undo, rel)
	}
	for _, r := range rs {
		if r.name == "" {
			continue
		}
		key := fmt.Sprintf("name:%d:%s", r.owner, r.name)
		if !m.claim(key) {
			return release, fmt.Errorf("a sandbox named %q is being created: %w", r.name, errdefs.ErrAlreadyExists)
		}
		undo = append(undo, func() { m.release(key) })
		if _, err := m.find(WithCaller(ctx, Caller{UID: r.owner}), r.name); err == nil {
			return release, fmt.Errorf("names: a sandbox named %q already exists: %w", r.name, errdefs.ErrAlreadyExists)
		} else if !errdefs.IsNotFound(err) {
			return release, err
		}
	}
	return release, nil
}

// checkRemapIDs fails unless the snapshotter mounts ID-mapped overlay
// layers, which a fork's layer shared by several uid blocks needs.
func (m *Manager) checkRemapIDs(ctx context.Context) error {
	snName := m.cfg.Images.Snapshotter()
	caps, err := m.cfg.Client.GetSnapshotterCapabilities(ctx, snName)
	if err != nil {
		return fmt.Errorf("fork: snapshotter %s: %w", snName, err)
	}
	if !slices.Contains(caps, "remap-ids") {
		return fmt.Errorf("fork needs ID-mapped overlay layers (snapshotter %s without remap-ids: containerd 2 and a kernel with ID-mapped overlayfs): %w", snName, errdefs.ErrFailedPrecondition)
	}
	return nil
}

// createForks creates the forks rs of srcID in parallel; if any fails,
// those made are destroyed and the first error is returned.
func (m *Manager) createForks(lctx context.Context, t0 time.Time, srcID string, rs []resolved, img client.Image, imgSpec ocispec.Image) ([]*Sandbox, error) {
	count := len(rs)
	out := make([]*Sandbox, count)
	errs := make([]error, count)
	var wg sync.WaitGroup
	for i := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = m.createResolved(lctx, t0, rs[i], img, imgSpec, false)
		}()
	}
	wg.Wait()
	var firstErr error
	for i, err := range errs {
		if err != nil && firstErr == nil {
			firstErr = fmt.Errorf("fork %s: sandbox %d of %d: %w", srcID, i+1, count, err)
		}
	}
	if firstErr == nil {
		return out, nil
	}
	cctx := context.WithoutCancel(lctx)
	for _, sb := range out {
		if sb == nil {
			continue
		}
		if c, err := m.cfg.Client.LoadContainer(cctx, sb.ID); err == nil {
			if err := m.destroy(cctx, c); err != nil {
				m.log.Error("fork failed; clean up a fork", "sandbox", sb.ID, "err", err)
			}
		}
	}
	return nil, firstErr
}

// forkRequests are the validated create requests of the forks: the
// source's settings with the request's over them.
func (m *Manager) forkRequests(req ForkRequest, sb *Sandbox, count int) ([]resolved, error) {
	cr := CreateRequest{
		// A fork runs on its source's runtime.
		Runtime: sb.Runtime.Name,
		Image:   sb.Image,
		Memory:  req.Memory,
		CPUs:    req.CPUs,
		Pids:    req.Pids,
		Env:     req.Env,
		Workdir: req.Workdir,
		Labels:  maps.Clone(sb.Labels),
		TTL:     req.TTL,
	}
	if cr.Memory == "" {
		cr.Memory = strconv.FormatInt(sb.Limits.MemoryBytes, 10)
	}
	if cr.CPUs == 0 {
		cr.CPUs = sb.Limits.CPUs
	}
	if cr.Pids == 0 {
		cr.Pids = sb.Limits.Pids
	}
	if cr.Workdir == "" {
		cr.Workdir = sb.Workdir
	}
	if cr.Labels == nil {
		cr.Labels = map[string]string{}
	}
	maps.Copy(cr.Labels, req.Labels)
	if n := sb.Network; n != nil && n.Mode != "" && n.Mode != "none" {
		cr.Network, cr.Allow = n.Mode, n.Allow
	}
	seen := map[string]bool{}
	rs := make([]resolved, count)
	for i := range rs {
		cr.Name = ""
		if len(req.Names) > 0 {
			cr.Name = req.Names[i]
			if seen[cr.Name] {
				return nil, fieldErr("names", "%q is given twice", cr.Name)
			}
			seen[cr.Name] = true
		}
		r, err := m.resolve(cr)
		if err != nil {
			if fe, ok := err.(*FieldError); ok && fe.Field == "name" {
				fe.Field = fmt.Sprintf("names[%d]", i)
			}
			return nil, err
		}
		// The source's default user and tunables (validated when it was
		// made) carry over as its workdir does.
		r.user, r.userSet, r.tun = sb.User, sb.User != "", sb.Tunables
		rs[i] = r
	}
	return rs, nil
}

// forkLayer copies the source's writable layer, with the source frozen,
// into a new snapshot on the same parent, unshifted as an image layer is,
// and commits it as a fork layer. It returns the fork layer's key, the
// host disk it is charged at (forkCharge) and how long the source was
// frozen.
func (m *Manager) forkLayer(ctx context.Context, ctr client.Container, src *source, active layerSrc) (string, int64, time.Duration, error) {
	sn := src.sn
	tmp := forkTempPrefix + newID()
	tm, err := sn.Prepare(ctx, tmp, active.parent)
	if err != nil {
		return "", 0, 0, fmt.Errorf("prepare fork layer: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			_ = sn.Remove(context.WithoutCancel(ctx), tmp)
		}
	}()
	upper, _, err := layerdiff.OverlayDirs(tm)
	if err != nil {
		return "", 0, 0, err
	}
	if upper == "" {
		return "", 0, 0, fmt.Errorf("fork layer %s has no overlay upperdir: %w", tmp, errdefs.ErrFailedPrecondition)
	}
	srcUpper, cleanup, err := layerDir(ctx, sn, active)
	if err != nil {
		return "", 0, 0, err
	}
	defer cleanup()
	t := time.Now()
	thaw, err := m.freezeChecked(ctx, ctr)
	if err != nil {
		return "", 0, 0, err
	}
	tf := time.Now()
	// The new layer sits on the source layer's own parent, so a copy of
	// its upperdir (unshifted) is the same layer: no tar is written or
	// read, and the kernel copies the data.
	st, err := layerdiff.CopyUpper(ctx, upper, srcUpper, src.shift, layerdiff.CopyOptions{})
	tc := time.Now()
	thaw()
	frozen := time.Since(t)
	if err != nil {
		return "", 0, frozen, err
	}
	m.log.Debug("fork layer copied", "sandbox", ctr.ID(), "entries", st.Entries, "bytes", st.Bytes,
		"freeze", tf.Sub(t).Round(time.Millisecond), "copy", tc.Sub(tf).Round(time.Millisecond), "thaw", time.Since(tc).Round(time.Millisecond))
	key := "boxd-fork-" + newID()
	charge := forkCharge(st)
	if err := sn.Commit(ctx, key, tmp, snapshots.WithLabels(map[string]string{LabelForkLayer: ctr.ID(),
		LabelForkLayerBytes: strconv.FormatInt(charge, 10)})); err != nil {
		return "", 0, frozen, fmt.Errorf("commit fork layer: %w", err)
	}
	committed = true
	return key, charge, frozen, nil
}
