//go:build linux

// Room: images. A build step's work in its build sandbox: RUN, COPY and
// ADD.

package runtime

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/boxd-dev/boxd/agent/wire"
	"github.com/boxd-dev/boxd/internal/dockerfile"
	"github.com/boxd-dev/boxd/internal/layerdiff"
	"github.com/boxd-dev/boxd/snapshot"
)

// buildCopyTar reads what a COPY or ADD takes from the context.
func (m *Manager) buildCopyTar(bctx *dockerfile.Context, s dockerfile.Step, sd instructions.SourcesAndDest, cfg ocispec.ImageConfig, add bool) (*dockerfile.Copy, error) {
	var srcs []string
	for _, p := range sd.SourcePaths {
		if add {
			l := strings.ToLower(p)
			if strings.Contains(l, "://") || strings.HasPrefix(l, "git@") {
				return nil, dockerfile.Errf(s.Line, nil, "ADD of a URL (%s) is not supported by boxd build; download it into the context", p)
			}
			for _, ext := range []string{".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".tar.zst"} {
				if strings.HasSuffix(l, ext) {
					return nil, dockerfile.Errf(s.Line, nil, "ADD of an archive (%s) is not supported by boxd build (it would be unpacked); use RUN tar", p)
				}
			}
		}
		srcs = append(srcs, p)
	}
	if len(sd.SourceContents) > 0 {
		return nil, dockerfile.Errf(s.Line, nil, "inline sources are not supported by boxd build")
	}
	if len(srcs) == 0 {
		return nil, dockerfile.Errf(s.Line, nil, "%s: no source", s.Original)
	}
	cp, err := bctx.CopyTar(srcs, sd.DestPath, cfg.WorkingDir)
	if err != nil {
		switch {
		case dockerfile.IsOutside(err):
			return nil, dockerfile.Errf(s.Line, nil, "%s: refused: %v", s.Original, err)
		case errdefs.IsNotFound(err):
			return nil, dockerfile.Errf(s.Line, nil, "%s: %v (not in the build context)", s.Original, err)
		}
		return nil, dockerfile.Errf(s.Line, nil, "%s: %v", s.Original, err)
	}
	return cp, nil
}

// buildInSandbox makes a sandbox from st's image, lets file change its
// files, and commits its writable layer as one layer; the sandbox goes
// whatever happens.
func (m *Manager) buildInSandbox(ctx context.Context, req BuildRequest, st *buildState, s dockerfile.Step, spec snapshot.CommitSpec, file func(id string) error) (snapshot.Image, error) {
	// Root in /: each step names its own user and directory, as Docker
	// runs a build's steps, whatever USER and WORKDIR the image has so far.
	sb, err := m.Create(ctx, CreateRequest{Image: st.img.Name, Labels: map[string]string{LabelBuild: "true"}, TTL: "1h", User: "0:0", Workdir: "/"})
	if err != nil {
		return snapshot.Image{}, fmt.Errorf("step sandbox: %w", err)
	}
	defer func() {
		if err := m.Delete(context.WithoutCancel(ctx), sb.ID); err != nil {
			m.log.Warn("build: remove step sandbox", "sandbox", sb.ID, "err", err)
		}
	}()
	if err := file(sb.ID); err != nil {
		return snapshot.Image{}, err
	}
	if err := layerdiff.CheckOverlay(); err != nil {
		return snapshot.Image{}, err
	}
	ctr, err := m.find(ctx, sb.ID)
	if err != nil {
		return snapshot.Image{}, err
	}
	src, err := m.loadSource(ctx, ctr)
	if err != nil {
		return snapshot.Image{}, err
	}
	spec.Sandbox = sb.ID
	var frozen time.Duration
	spec.Layers = m.commitLayers(ctr, src, &frozen)
	return m.cfg.Images.Commit(ctx, spec)
}

// ensureDir makes dir (and its parents) in a step sandbox, as root.
func (m *Manager) ensureDir(ctx context.Context, id, dir string) error {
	if dir == "" || dir == "/" {
		return nil
	}
	return m.MakeDir(ctx, id, wire.FileMkdirArgs{Path: dir, Parents: true, User: "0:0"}) // Docker makes WORKDIR as root
}

// buildRun runs a RUN's command in the step sandbox as the image's user
// in its workdir.
func (m *Manager) buildRun(ctx context.Context, id string, s dockerfile.Step, args, env []string, cfg ocispec.ImageConfig) error {
	if err := m.ensureDir(ctx, id, cfg.WorkingDir); err != nil {
		return dockerfile.Errf(s.Line, nil, "WORKDIR %s: %v", cfg.WorkingDir, err)
	}
	ps, err := m.ExecProcess(ctx, id, wire.ProcessSpec{ExecRequest: wire.ExecRequest{Args: args, Env: env, Dir: cfg.WorkingDir, User: cfg.User}})
	if err != nil {
		return dockerfile.Errf(s.Line, errUnwrapKind(err), "%s: %v", s.Original, err)
	}
	defer ps.Close()
	var tail []byte
	var res *wire.ExecResult
	for {
		ev, err := ps.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return dockerfile.Errf(s.Line, errdefs.ErrUnknown, "%s: %v", s.Original, err)
		}
		if ev.Result != nil {
			res = ev.Result
			continue
		}
		tail = append(tail, ev.Data...)
		if len(tail) > maxRunTail {
			tail = tail[len(tail)-maxRunTail:]
		}
	}
	if res == nil {
		return dockerfile.Errf(s.Line, errdefs.ErrUnknown, "%s: no exit status", s.Original)
	}
	if res.ExitCode != 0 || res.Signal != "" {
		how := fmt.Sprintf("exit code %d", res.ExitCode)
		if res.Signal != "" {
			how = "killed by " + res.Signal
		}
		return dockerfile.Errf(s.Line, errdefs.ErrFailedPrecondition, "%s: failed (%s); output ends: %s", s.Original, how, strings.TrimSpace(string(tail)))
	}
	return nil
}

// buildCopy extracts a COPY's tar in the step sandbox and applies --chown
// to what it copied.
func (m *Manager) buildCopy(ctx context.Context, id string, s dockerfile.Step, cp *dockerfile.Copy, chown string) error {
	if err := m.ensureDir(ctx, id, cp.Dir); err != nil {
		return dockerfile.Errf(s.Line, nil, "%s: destination %s: %v", s.Original, cp.Dir, err)
	}
	for _, t := range cp.Tars {
		if err := m.CopyIn(ctx, id, CopyIn{Dest: cp.Dir, Tar: bytes.NewReader(t)}); err != nil {
			return dockerfile.Errf(s.Line, errUnwrapKind(err), "%s: %v", s.Original, err)
		}
	}
	if chown == "" {
		return nil
	}
	for _, t := range cp.Tops {
		if err := m.ChownPath(ctx, id, wire.ChownArgs{Path: path.Join(cp.Dir, t), Owner: chown, Recursive: true}); err != nil {
			return dockerfile.Errf(s.Line, errUnwrapKind(err), "%s: --chown=%s: %v", s.Original, chown, err)
		}
	}
	return nil
}
