//go:build linux

// Room: images. Dockerfile builds: each step planned, taken from the
// cache or committed (the instructions run in buildrun.go).

package runtime

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/shell"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/boxd-dev/boxd/internal/dockerfile"
	"github.com/boxd-dev/boxd/snapshot"
)

// LabelBuild is set on a build's step sandboxes: the image being built.
const LabelBuild = "boxd-build"

// buildCacheRepo names the image records that hold step results; the
// tag is the step's cache key.
const buildCacheRepo = "boxd-build-cache/step"

// BuildRequest asks for an image built from a Dockerfile.
type BuildRequest struct {
	Ref        string
	Dockerfile []byte
	BuildArgs  map[string]string
	Context    *dockerfile.Context
	NoCache    bool
	Opts       snapshot.WriteOptions // Force, caller, users (for REF)
}

// BuildStep reports one instruction of a build.
type BuildStep struct {
	Line        int
	Instruction string
	Cached      bool // its result came from the cache (or it has none: ARG)
	Took        time.Duration
}

// BuildResult is a finished build.
type BuildResult struct {
	Image snapshot.Image
	Steps []BuildStep
}

// buildState is the image a build has reached and what its instructions
// have declared so far.
type buildState struct {
	img  images.Image // current image record (a cache entry or the FROM image)
	cfg  ocispec.ImageConfig
	args map[string]string // ARGs declared so far, with their values
}

// Build runs a Dockerfile: each RUN, COPY and ADD in a sandbox of its own
// made from the previous step's image (boxd's defaults: no network,
// user namespace, limits), committed as one layer; each other instruction
// a config change without a layer. Every step's result is an image record
// named by a cache key (parent image digest, instruction after expansion,
// its inputs), so an unchanged step is a lookup. REF is written at the end
// only: a failure leaves no REF and no sandbox (finished steps stay
// cached).
func (m *Manager) Build(ctx context.Context, req BuildRequest, progress func(BuildStep)) (BuildResult, error) {
	ctx = namespaces.WithNamespace(ctx, m.cfg.Namespace)
	// Each step is a commit of the sandbox that ran it, which gVisor
	// sandboxes do not offer; running the steps under runc instead would
	// give a Dockerfile less isolation than this host's default promises.
	if m.cfg.DefaultRuntime == RuntimeGvisor {
		return BuildResult{}, gvRefuse("build", "each step is a commit, and "+gvNoHostLayer+"; build on a boxd whose --default-runtime is runc")
	}
	if _, err := m.cfg.Images.CheckWritable(ctx, req.Ref, req.Opts); err != nil {
		if errdefs.IsInvalidArgument(err) {
			return BuildResult{}, fieldErr("ref", "%v", err)
		}
		return BuildResult{}, err
	}
	for k := range req.BuildArgs {
		if k == "" || strings.ContainsAny(k, "= \t\n") {
			return BuildResult{}, fieldErr("build_args", "%q is not a valid name", k)
		}
	}
	df, err := dockerfile.Parse(req.Dockerfile)
	if err != nil {
		return BuildResult{}, err
	}
	if req.Context == nil {
		req.Context, _ = dockerfile.ReadContext(bytes.NewReader(nil))
	}
	lex := shell.NewLex('\\')

	// FROM: a local image, with the ARGs before it.
	meta := map[string]string{}
	for _, a := range df.MetaArgs {
		for _, kv := range a.Args {
			v, _ := req.BuildArgs[kv.Key]
			if _, given := req.BuildArgs[kv.Key]; !given && kv.Value != nil {
				v = *kv.Value
			}
			meta[kv.Key] = v
		}
	}
	fromName, _, err := lex.ProcessWord(df.From.BaseName, envGetter{vars: meta})
	if err != nil {
		return BuildResult{}, dockerfile.Errf(df.FromLine, nil, "FROM %s: %v", df.From.BaseName, err)
	}
	base, err := m.cfg.Images.Get(ctx, fromName)
	if err != nil {
		return BuildResult{}, dockerfile.Errf(df.FromLine, errUnwrapKind(err), "FROM %s: %v", fromName, err)
	}
	spec, err := base.Spec(ctx)
	if err != nil {
		return BuildResult{}, dockerfile.Errf(df.FromLine, nil, "FROM %s: read its config: %v", fromName, err)
	}
	st := &buildState{img: base.Metadata(), cfg: spec.Config, args: map[string]string{}}
	res := BuildResult{}
	t0 := time.Now()

	for _, s := range df.Steps {
		ts := time.Now()
		cached, err := m.buildStep(ctx, req, st, lex, s)
		if err != nil {
			return BuildResult{}, err
		}
		bs := BuildStep{Line: s.Line, Instruction: s.Original, Cached: cached, Took: time.Since(ts)}
		res.Steps = append(res.Steps, bs)
		if progress != nil {
			progress(bs)
		}
	}
	img, err := m.cfg.Images.Tag(ctx, req.Ref, st.img, nil, req.Opts)
	if err != nil {
		if errdefs.IsInvalidArgument(err) {
			return BuildResult{}, fieldErr("ref", "%v", err)
		}
		return BuildResult{}, err
	}
	res.Image = img
	m.log.Info("built", "image", img.Name, "digest", img.Digest, "steps", len(res.Steps), "took", time.Since(t0).Round(time.Millisecond))
	return res, nil
}

// errUnwrapKind keeps an error's errdefs kind for a LineError.
func errUnwrapKind(err error) error {
	for _, k := range []error{errdefs.ErrNotFound, errdefs.ErrInvalidArgument, errdefs.ErrFailedPrecondition} {
		if errors.Is(err, k) {
			return k
		}
	}
	return errdefs.ErrFailedPrecondition
}

// envGetter gives the shell lexer a build's variables.
type envGetter struct{ vars map[string]string }

func (e envGetter) Get(k string) (string, bool) { v, ok := e.vars[k]; return v, ok }
func (e envGetter) Keys() []string {
	ks := make([]string, 0, len(e.vars))
	for k := range e.vars {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// vars are what an instruction's words see: ARGs, then ENV (ENV wins).
func (st *buildState) vars() map[string]string {
	v := map[string]string{}
	for k, a := range st.args {
		v[k] = a
	}
	for _, kv := range st.cfg.Env {
		k, val, _ := strings.Cut(kv, "=")
		v[k] = val
	}
	return v
}

// runEnv is the environment of a RUN: the image's env plus the ARGs the
// env does not set (as docker does).
func (st *buildState) runEnv() []string {
	env := slices.Clone(st.cfg.Env)
	set := map[string]bool{}
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		set[k] = true
	}
	var ks []string
	for k := range st.args {
		if !set[k] {
			ks = append(ks, k)
		}
	}
	sort.Strings(ks)
	for _, k := range ks {
		env = append(env, k+"="+st.args[k])
	}
	return env
}

func setEnv(env []string, k, v string) []string {
	for i, kv := range env {
		if strings.HasPrefix(kv, k+"=") {
			env[i] = k + "=" + v
			return env
		}
	}
	return append(env, k+"="+v)
}

// buildStep runs one instruction from st, moving st on; it reports
// whether the result came from the cache.
func (m *Manager) buildStep(ctx context.Context, req BuildRequest, st *buildState, lex *shell.Lex, s dockerfile.Step) (bool, error) {
	if ex, ok := s.Cmd.(instructions.SupportsSingleWordExpansion); ok {
		vars := envGetter{vars: st.vars()}
		err := ex.Expand(func(w string) (string, error) {
			out, _, err := lex.ProcessWord(w, vars)
			return out, err
		})
		if err != nil {
			return false, stepErr(s, nil, "%s: %v", s.Original, err)
		}
	}
	if c, ok := s.Cmd.(*instructions.ArgCommand); ok {
		for _, kv := range c.Args {
			v, given := req.BuildArgs[kv.Key]
			if !given && kv.Value != nil {
				v = *kv.Value
			}
			st.args[kv.Key] = v
		}
		return true, nil // no image change; RUN's cache key sees the values
	}
	cfg := st.cfg
	cfg.Env = slices.Clone(cfg.Env)
	key, file, err := m.fileStep(ctx, req, st, s, cfg)
	if err == nil && key == "" {
		key, err = configStep(st, lex, s, &cfg)
	}
	if err != nil {
		return false, err
	}
	return m.commitStep(ctx, req, st, s, key, cfg, file)
}

// stepErr is an error of step s's line.
func stepErr(s dockerfile.Step, cause error, format string, args ...any) error {
	return dockerfile.Errf(s.Line, cause, format, args...)
}

// fileStep plans an instruction that changes files (RUN, COPY, ADD): its
// canonical form for the cache and what it does in the build sandbox. Any
// other instruction gets an empty key.
func (m *Manager) fileStep(ctx context.Context, req BuildRequest, st *buildState, s dockerfile.Step, cfg ocispec.ImageConfig) (key string, file func(id string) error, _ error) {
	switch c := s.Cmd.(type) {
	case *instructions.RunCommand:
		args := cmdLine(c.ShellDependantCmdLine)
		if len(args) == 0 {
			return "", nil, stepErr(s, nil, "RUN without a command")
		}
		env := st.runEnv()
		key = fmt.Sprintf("RUN %q env=%q user=%q dir=%q", args, env, cfg.User, cfg.WorkingDir)
		return key, func(id string) error { return m.buildRun(ctx, id, s, args, env, cfg) }, nil
	case *instructions.CopyCommand:
		cp, err := m.buildCopyTar(req.Context, s, c.SourcesAndDest, cfg, false)
		if err != nil {
			return "", nil, err
		}
		key = fmt.Sprintf("COPY %s chown=%q", cp.Hash, c.Chown)
		return key, func(id string) error { return m.buildCopy(ctx, id, s, cp, c.Chown) }, nil
	case *instructions.AddCommand:
		cp, err := m.buildCopyTar(req.Context, s, c.SourcesAndDest, cfg, true)
		if err != nil {
			return "", nil, err
		}
		key = fmt.Sprintf("ADD %s chown=%q", cp.Hash, c.Chown)
		return key, func(id string) error { return m.buildCopy(ctx, id, s, cp, c.Chown) }, nil
	}
	return "", nil, nil
}

// configStep applies an instruction that changes only the image config
// to cfg and returns its canonical form for the cache.
func configStep(st *buildState, lex *shell.Lex, s dockerfile.Step, cfg *ocispec.ImageConfig) (string, error) {
	switch c := s.Cmd.(type) {
	case *instructions.EnvCommand:
		for _, kv := range c.Env {
			cfg.Env = setEnv(cfg.Env, kv.Key, kv.Value)
		}
		return "ENV " + kvString(c.Env), nil
	case *instructions.WorkdirCommand:
		wd := c.Path
		if !path.IsAbs(wd) {
			wd = path.Join("/", cfg.WorkingDir, wd)
		}
		cfg.WorkingDir = path.Clean(wd)
		return "WORKDIR " + cfg.WorkingDir, nil
	case *instructions.UserCommand:
		cfg.User = c.User
		return "USER " + c.User, nil
	case *instructions.LabelCommand:
		if cfg.Labels == nil {
			cfg.Labels = map[string]string{}
		} else {
			cfg.Labels = cloneMap(cfg.Labels)
		}
		for _, kv := range c.Labels {
			cfg.Labels[kv.Key] = kv.Value
		}
		return "LABEL " + kvString(c.Labels), nil
	case *instructions.ExposeCommand:
		ports := map[string]struct{}{}
		for p := range cfg.ExposedPorts {
			ports[p] = struct{}{}
		}
		vars := envGetter{vars: st.vars()}
		for _, p := range c.Ports {
			p, _, err := lex.ProcessWord(p, vars)
			if err != nil {
				return "", stepErr(s, nil, "%s: %v", s.Original, err)
			}
			if !strings.Contains(p, "/") {
				p += "/tcp"
			}
			ports[p] = struct{}{}
		}
		cfg.ExposedPorts = ports
		return fmt.Sprintf("EXPOSE %q", c.Ports), nil
	case *instructions.EntrypointCommand:
		cfg.Entrypoint = cmdLine(c.ShellDependantCmdLine)
		if !c.PrependShell || len(c.CmdLine) > 0 {
			cfg.Cmd = nil // docker: ENTRYPOINT resets an inherited CMD
		}
		return fmt.Sprintf("ENTRYPOINT %q", cfg.Entrypoint), nil
	case *instructions.CmdCommand:
		cfg.Cmd = cmdLine(c.ShellDependantCmdLine)
		return fmt.Sprintf("CMD %q", cfg.Cmd), nil
	}
	return "", stepErr(s, nil, "%s is not supported by boxd build", s.Original)
}

// commitStep makes the step's image (key: its canonical form; file: what
// it does in the build sandbox, nil for a config-only step), or takes it
// from the cache, and moves st onto it.
func (m *Manager) commitStep(ctx context.Context, req BuildRequest, st *buildState, s dockerfile.Step, key string, cfg ocispec.ImageConfig, file func(id string) error) (bool, error) {
	sum := sha256.Sum256([]byte(st.img.Target.Digest.String() + "\n" + key))
	cacheName := buildCacheRepo + ":" + hex.EncodeToString(sum[:])
	if !req.NoCache {
		if img, err := m.cfg.Images.Get(ctx, cacheName); err == nil {
			st.img, st.cfg = img.Metadata(), cfg
			if sp, err := img.Spec(ctx); err == nil {
				st.cfg = sp.Config
			}
			return true, nil
		}
	}
	spec := snapshot.CommitSpec{
		Name: cacheName, Base: st.img, CreatedBy: s.Original,
		Config: func(c *ocispec.ImageConfig) { *c = cfg },
		Labels: map[string]string{snapshot.LabelBuildCache: "true"},
		Opts:   snapshot.WriteOptions{Force: true, Caller: req.Opts.Caller},
	}
	var (
		img snapshot.Image
		err error
	)
	if file == nil {
		spec.Layers = func(context.Context, snapshot.LayerAdder) error { return nil }
		img, err = m.cfg.Images.Commit(ctx, spec)
	} else {
		img, err = m.buildInSandbox(ctx, req, st, s, spec, file)
	}
	if err != nil {
		var le *dockerfile.LineError
		if errors.As(err, &le) {
			return false, err
		}
		return false, stepErr(s, errUnwrapKind(err), "%s: %v", s.Original, err)
	}
	rec, err := m.cfg.Images.Get(ctx, img.Name)
	if err != nil {
		return false, stepErr(s, nil, "%s: %v", s.Original, err)
	}
	st.img, st.cfg = rec.Metadata(), cfg
	return false, nil
}

func kvString(kvs instructions.KeyValuePairs) string {
	var b strings.Builder
	for _, kv := range kvs {
		fmt.Fprintf(&b, "%q=%q ", kv.Key, kv.Value)
	}
	return b.String()
}

func cloneMap(in map[string]string) map[string]string {
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

// cmdLine is a RUN, CMD or ENTRYPOINT as argv: the shell form through
// /bin/sh -c, the exec form as written.
func cmdLine(c instructions.ShellDependantCmdLine) []string {
	if c.PrependShell && len(c.CmdLine) > 0 {
		return []string{"/bin/sh", "-c", strings.Join(c.CmdLine, " ")}
	}
	return slices.Clone(c.CmdLine)
}

// maxRunTail is how much of a failed RUN's output its error shows.
const maxRunTail = 2048
