//go:build linux

// Room: create. Create: the request resolved against its image, names
// and quotas held, a warm-pool member adopted or a sandbox made cold
// (createResolved), and the spec and labels a new sandbox carries.

package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/boxd-dev/boxd/internal/events"
	"github.com/boxd-dev/boxd/oci"
)

// Create makes and starts a sandbox and returns once its init answers. A
// create that fails at any step removes everything it made.
func (m *Manager) Create(ctx context.Context, req CreateRequest) (*Sandbox, error) {
	t0 := time.Now()
	r, err := m.resolve(req)
	if err != nil {
		return nil, err
	}
	r.owner = ownerUID(ctx)
	if err := checkPublish(ctx, r.publish); err != nil {
		return nil, err
	}
	if err := m.resolveSecrets(req.Secrets, &r); err != nil {
		return nil, err
	}
	ctx = namespaces.WithNamespace(ctx, m.cfg.Namespace)
	img, err := m.cfg.Images.Get(ctx, r.image)
	if err != nil {
		if errdefs.IsInvalidArgument(err) {
			return nil, fieldErr("image", "%v", err)
		}
		return nil, err
	}
	imgSpec, err := m.specs.get(ctx, img)
	if err != nil {
		return nil, fmt.Errorf("image %s: read config: %w", r.image, err)
	}
	if r, err = withImage(r, imgSpec.Config); err != nil {
		return nil, err
	}
	git, err := parseGit(req.Git, req.GitDepth, r)
	if err != nil {
		return nil, err
	}

	if r.name != "" {
		// Creates run in parallel; only two with the same name and owner
		// must not. Another user's name does not block this one's.
		key := fmt.Sprintf("name:%d:%s", r.owner, r.name)
		if !m.claim(key) {
			return nil, fmt.Errorf("a sandbox named %q is being created: %w", r.name, errdefs.ErrAlreadyExists)
		}
		defer m.release(key)
		if _, err := m.find(WithCaller(ctx, Caller{UID: r.owner}), r.name); err == nil {
			if !req.Replace {
				return nil, fmt.Errorf("a sandbox named %q already exists: %w", r.name, errdefs.ErrAlreadyExists)
			}
			if err := m.DeleteGraceful(WithCaller(ctx, Caller{UID: r.owner}), r.name, DefaultStopGrace); err != nil && !errdefs.IsNotFound(err) {
				return nil, fmt.Errorf("replace the sandbox named %q: %w", r.name, err)
			}
		} else if !errdefs.IsNotFound(err) {
			return nil, err
		}
	}
	// Its volumes are held from here until the sandbox holds them (or
	// the create failed).
	volToken := "create:" + newID()
	if r.volumes, err = m.attachVolumes(ctx, volToken, r, req.Volumes); err != nil {
		return nil, err
	}
	defer m.releaseVolumes(volToken)
	if r.binds, r.bindCreds, err = m.parseBinds(ctx, r, req.Binds); err != nil {
		return nil, err
	}
	// The owner's quota share is held from here until the sandbox is
	// counted as visible (or the create failed).
	releaseQuota, err := m.reserveQuota(r)
	if err != nil {
		return nil, err
	}
	defer releaseQuota()
	// Refills wait while creates are being served (pool.holdOff).
	m.pool.serveBegin()
	defer m.pool.serveEnd()
	// A create the pool cannot serve (fromPool) is made cold.
	sb, ok, err := m.fromPool(ctx, r, img, imgSpec)
	if err != nil {
		return nil, err
	}
	if ok {
		return m.finishCreate(ctx, sb, git)
	}
	sb, err = m.createResolved(ctx, t0, r, img, imgSpec, false)
	if err != nil {
		return nil, err
	}
	m.settleVolumes(volToken, sb.ID)
	return m.finishCreate(ctx, sb, git)
}

// finishCreate checks out the create's repository, if it names one,
// before the sandbox is announced; a failed clone deletes the sandbox.
func (m *Manager) finishCreate(ctx context.Context, sb *Sandbox, git *gitSource) (*Sandbox, error) {
	if git != nil {
		if err := m.cloneGit(ctx, sb.ID, git); err != nil {
			if derr := m.Delete(context.WithoutCancel(ctx), sb.ID); derr != nil && !errdefs.IsNotFound(derr) {
				m.log.Warn("delete sandbox after a failed clone", "sandbox", sb.ID, "err", derr)
			}
			return nil, err
		}
	}
	m.created(sb.ID)
	return sb, nil
}

// created records a new client-visible sandbox: events, and its idle
// clock starts now.
func (m *Manager) created(id string) {
	m.touch(id)
	m.emit(events.Created, id, nil)
	m.emit(events.Started, id, nil)
}

// createResolved makes a sandbox from a validated request; a pool member
// carries the pool label instead of the managed one, so clients do not see
// it until it is handed out.
func (m *Manager) createResolved(ctx context.Context, t0 time.Time, r resolved, img client.Image, imgSpec ocispec.Image, member bool) (_ *Sandbox, retErr error) {
	id := r.id
	if id == "" {
		id = newID()
	}
	m.claim(id)
	defer m.release(id)
	if err := m.admit(ctx, id, member); err != nil {
		return nil, err
	}
	c := &creation{m: m, id: id, r: r, t0: t0, phases: make([]any, 0, 12), log: m.log.With("sandbox", id)}
	c.phase("image")
	if err := c.takeIDs(ctx); err != nil {
		return nil, fmt.Errorf("create sandbox %s: %w", id, err)
	}
	c.newRecord(img)
	// Undo in reverse order whatever got made, whatever step failed.
	defer func() {
		if retErr != nil {
			c.rollback(ctx, retErr)
		}
	}()

	if err := os.MkdirAll(m.sandboxDir(id), 0o700); err != nil {
		return nil, fmt.Errorf("create sandbox %s: state dir: %w", id, err)
	}
	c.onFail(func(context.Context) { _ = os.RemoveAll(m.sandboxDir(id)) })
	if err := c.mountBinds(); err != nil {
		return nil, fmt.Errorf("create sandbox %s: %w", id, err)
	}
	if err := c.startNetwork(ctx, member); err != nil {
		return nil, fmt.Errorf("create sandbox %s: %w", id, err)
	}
	beforeTask, beforeStart := c.networkHooks(ctx)
	spec, env, err := c.spec(ctx, imgSpec)
	if err != nil {
		return nil, fmt.Errorf("create sandbox %s: spec: %w", id, err)
	}
	// Listen before anything else is made, so a host port in use fails
	// the create early; connections wait in the backlog until the init
	// is ready.
	lns, err := bindPorts(ctx, "publish", r.publish)
	if err != nil {
		return nil, err
	}
	c.onFail(func(context.Context) {
		for _, l := range lns {
			l.Close()
		}
	})
	c.rec.Ports = mappings(lns)
	labels := c.labels(member)
	ctr, leaseDone, err := c.newContainer(ctx, img, spec, labels)
	if err != nil {
		return nil, err
	}
	defer leaseDone()
	if err := c.capDisk(ctx); err != nil {
		return nil, fmt.Errorf("create sandbox %s: %w", id, err)
	}
	c.netCtr = ctr
	task, err := m.startInit(ctx, ctr, spec, c.phase, beforeTask, beforeStart)
	if err != nil {
		return nil, m.explainFailure(fmt.Errorf("create sandbox %s: %w", id, err))
	}
	if c.netLabelErr != nil {
		if err := <-c.netLabelErr; err != nil {
			return nil, fmt.Errorf("create sandbox %s: store network: %w", id, err)
		}
		labels[LabelNetwork] = c.netLabel
		c.phase("label")
	}
	m.servePorts(id, lns)
	m.execDefs.Store(id, Tunables{ExecTimeout: r.tun.ExecTimeout, OutputLimit: r.tun.OutputLimit})
	if !member {
		m.inv.showOwned(id, ownedOf(r))
	}
	return c.done(labels, env, task), nil
}

// specFor builds a sandbox's runtime-spec for the uid block at hostID; env is the environment commands
// see (without the HOSTNAME boxd adds). The spec carries it, with the
// workdir and pids limit, in the annotation the init is handed at start.
func (m *Manager) specFor(ctx context.Context, id string, r resolved, imgSpec ocispec.Image, net *netState, hostID uint32) (*specs.Spec, []string, error) {
	var netns, resolvConf string
	if net != nil {
		netns, resolvConf = net.NetNS, m.resolvConfPath(id)
	}
	env := append(append([]string{}, imgSpec.Config.Env...), r.env...)
	hostname := id
	if r.tun.Hostname != "" {
		hostname = r.tun.Hostname
	}
	var tmpfs []oci.Tmpfs
	var tmpSize, shmSize int64
	for _, t := range r.tun.Tmpfs {
		switch t.Path {
		case "/tmp":
			tmpSize = t.SizeBytes
		case devShm:
			shmSize = t.SizeBytes
		default:
			tmpfs = append(tmpfs, oci.Tmpfs{Path: t.Path, SizeBytes: t.SizeBytes})
		}
	}
	spec, err := oci.Spec(ctx, oci.Config{
		ID: id, Hostname: hostname, Workdir: r.workdir, User: r.user,
		ReadOnlyRootfs: r.tun.ReadOnly, TmpSizeBytes: tmpSize, ShmSizeBytes: shmSize, Tmpfs: tmpfs,
		NoFile: r.tun.Ulimits.NoFile, NProc: r.tun.Ulimits.NProc, FSize: r.tun.Ulimits.FSize, CPUTime: r.tun.Ulimits.CPU,
		CPUShares: cpuShares(r.tun.CPUWeight), MemoryLow: r.tun.MemoryLow,
		Env:         append(slices.Clip(env), "HOSTNAME="+hostname),
		MemoryBytes: r.limits.MemoryBytes, CPUs: r.limits.CPUs, Pids: r.limits.Pids,
		HostUID: hostID, HostGID: hostID, IDMapSize: m.cfg.IDMapSize,
		InitBinary: m.cfg.InitBinary, ChannelDir: m.handoffDir(id), AgentDir: m.gvAgentDirFor(id, r.runtime),
		CgroupsPath: m.cgPath(id),
		NetNSPath:   netns, ResolvConf: resolvConf,
	})
	var fe *oci.FieldError
	if errors.As(err, &fe) && fe.Field == "Env" {
		// Only an image's env can be this large (a request's is capped).
		return nil, nil, fieldErr("image", "%s: its environment is too large: %v", r.image, err)
	}
	return spec, env, err
}

// labelsFor is every label a client-visible sandbox carries: its record,
// expiry, name and the user's labels.
func (m *Manager) labelsFor(rec record, r resolved) map[string]string {
	recJSON, _ := json.Marshal(rec)
	labels := map[string]string{LabelManaged: "true", LabelSandbox: string(recJSON), LabelExpiresAt: rec.ExpiresAt.Format(time.RFC3339),
		LabelOwner: strconv.FormatUint(uint64(r.owner), 10)}
	if r.name != "" {
		labels[LabelName] = r.name
	}
	if v := portsLabel(rec.Ports); v != "" {
		labels[LabelPorts] = v
	}
	if v := idleLabel(r.idle); v != "" {
		labels[LabelIdle] = v
	}
	if r.autoResume {
		labels[LabelAutoResume] = "true"
	}
	for k, v := range r.labels {
		labels[UserLabelPrefix+k] = v
	}
	return labels
}
