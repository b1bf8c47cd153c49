//go:build linux

package dockerapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/errdefs"

	"github.com/boxd-dev/boxd/runtime"
)

func (s *Server) containerRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /containers/create", s.createContainer)
	mux.HandleFunc("GET /containers/json", s.listContainers)
	mux.HandleFunc("GET /containers/{id}/json", s.inspectContainer)
	mux.HandleFunc("POST /containers/{id}/start", s.startContainer)
	mux.HandleFunc("POST /containers/{id}/stop", s.stopContainer)
	mux.HandleFunc("POST /containers/{id}/kill", s.killContainer)
	mux.HandleFunc("POST /containers/{id}/wait", s.waitContainer)
	mux.HandleFunc("DELETE /containers/{id}", s.removeContainer)
	mux.HandleFunc("GET /containers/{id}/logs", s.containerLogs)
	mux.HandleFunc("POST /containers/{id}/attach", s.attachContainer)
	mux.HandleFunc("POST /containers/{id}/resize", s.resizeContainer)
	mux.HandleFunc("POST /containers/{id}/pause", s.pauseContainer)
	mux.HandleFunc("POST /containers/{id}/unpause", s.pauseContainer)
	mux.HandleFunc("GET /containers/{id}/stats", s.containerStats)
	mux.HandleFunc("GET /containers/{id}/top", s.containerTop)
	mux.HandleFunc("POST /containers/{id}/update", s.updateContainer)
	mux.HandleFunc("POST /containers/{id}/rename", s.renameContainer)
}

// resolve finds the caller's sandbox by id, name or unique id prefix.
// Another user's is "No such container", as a missing one is.
func (s *Server) resolve(ctx context.Context, ref string) (*runtime.Sandbox, error) {
	ref = strings.TrimPrefix(ref, "/")
	sb, err := s.Manager.Get(ctx, ref)
	if err == nil {
		return sb, nil
	}
	if !errdefs.IsNotFound(err) && !errdefs.IsInvalidArgument(err) {
		return nil, err
	}
	if ref != "" && idRe.MatchString(ref) {
		if sbs, lerr := s.Manager.List(ctx, nil); lerr == nil {
			var match *runtime.Sandbox
			for _, x := range sbs {
				if strings.HasPrefix(x.ID, ref) {
					if match != nil {
						return nil, errf(http.StatusNotFound, "No such container: %s (the prefix is ambiguous)", ref)
					}
					match = x
				}
			}
			if match != nil {
				return s.Manager.Get(ctx, match.ID)
			}
		}
	}
	return nil, errf(http.StatusNotFound, "No such container: %s", ref)
}

// createBody is the part of container create boxd reads; checkFields has
// already refused what it does not serve.
type createBody struct {
	Image       string
	Cmd         []string
	Entrypoint  []string
	Env         []string
	WorkingDir  string
	User        string
	Labels      map[string]string
	Tty         bool
	OpenStdin   bool
	Hostname    string
	StopSignal  string
	StopTimeout *int
	HostConfig  hostConfig
}

func (s *Server) createContainer(w http.ResponseWriter, r *http.Request) {
	raw := map[string]json.RawMessage{}
	if err := decodeBody(r, &raw); err != nil {
		fail(w, err)
		return
	}
	whole, _ := json.Marshal(raw)
	if err := checkFields(whole, "", createFields); err != nil {
		fail(w, err)
		return
	}
	if err := checkFields(raw["HostConfig"], "HostConfig.", hostConfigFields); err != nil {
		fail(w, err)
		return
	}
	var body createBody
	if err := json.Unmarshal(whole, &body); err != nil {
		fail(w, errf(http.StatusBadRequest, "malformed JSON body: %v", err))
		return
	}
	cfg, req, err := s.createRequest(r.Context(), r.URL.Query().Get("name"), body)
	if err != nil {
		fail(w, err)
		return
	}
	o, err := mountRequest(body.HostConfig, &req)
	if err != nil {
		fail(w, err)
		return
	}
	sb, err := s.Manager.Create(r.Context(), req)
	if err != nil {
		fail(w, dockerField(originField(err, o)))
		return
	}
	caller, _ := runtime.CallerFrom(r.Context())
	x := &ctr{id: sb.ID, dir: s.ctrDir(sb.ID), cfg: cfg, exited: make(chan struct{}), started: make(chan struct{}), removed: make(chan struct{}),
		st: ctrState{Status: "created", Owner: caller.UID}}
	if err := s.persist(x); err != nil {
		_ = s.Manager.Delete(context.WithoutCancel(r.Context()), sb.ID)
		fail(w, err)
		return
	}
	s.ctrs.add(x)
	s.rememberCtr(sb.ID, cfg)
	writeJSON(w, http.StatusCreated, map[string]any{"Id": sb.ID, "Warnings": []string{}})
}

func (s *Server) persist(x *ctr) error {
	if err := os.MkdirAll(x.dir, 0o700); err != nil {
		return err
	}
	if err := writeJSON0(filepath.Join(x.dir, "config.json"), x.cfg); err != nil {
		return err
	}
	return x.save()
}

// createRequest turns a Docker create into boxd's, resolving the main
// command from the image as Docker does.
func (s *Server) createRequest(ctx context.Context, name string, b createBody) (ctrConfig, runtime.CreateRequest, error) {
	if b.Image == "" {
		return ctrConfig{}, runtime.CreateRequest{}, errf(http.StatusBadRequest, "Image: no image given")
	}
	img, err := s.Images.Get(ctx, b.Image)
	if full := dockerFullName(b.Image); errdefs.IsNotFound(err) && full != "" && full != b.Image {
		// boxd's names are as given; Docker's short names also find
		// the docker.io name an image load or pull gave.
		if img, err = s.Images.Get(ctx, full); err == nil {
			b.Image = full
		}
	}
	if err != nil {
		if errdefs.IsNotFound(err) {
			return ctrConfig{}, runtime.CreateRequest{}, errf(http.StatusNotFound, "No such image: %s", b.Image)
		}
		return ctrConfig{}, runtime.CreateRequest{}, err
	}
	spec, err := img.Spec(ctx)
	if err != nil {
		return ctrConfig{}, runtime.CreateRequest{}, err
	}
	entry, cmd := b.Entrypoint, b.Cmd
	if entry == nil {
		entry = spec.Config.Entrypoint
		if cmd == nil {
			cmd = spec.Config.Cmd
		}
	}
	args := append(append([]string(nil), entry...), cmd...)
	if len(args) == 0 {
		return ctrConfig{}, runtime.CreateRequest{}, errf(http.StatusBadRequest, "Cmd: no command specified")
	}
	hc := b.HostConfig
	cfg := ctrConfig{Name: strings.TrimPrefix(name, "/"), Created: time.Now().UTC(), Image: b.Image, Args: args,
		Entrypoint: b.Entrypoint, Cmd: b.Cmd, Env: b.Env, WorkingDir: b.WorkingDir, User: b.User, Labels: b.Labels,
		Tty: b.Tty, OpenStdin: b.OpenStdin, Hostname: b.Hostname, StopSignal: b.StopSignal, StopTimeout: b.StopTimeout, Host: hc}
	req := runtime.CreateRequest{Image: b.Image, Name: cfg.Name, Env: b.Env, Workdir: b.WorkingDir, Labels: b.Labels, User: b.User,
		Tunables: runtime.TunablesRequest{ReadOnly: hc.ReadonlyRootfs, Hostname: b.Hostname}}
	if hc.Memory > 0 {
		req.Memory = strconv.FormatInt(hc.Memory, 10)
	}
	switch {
	case hc.NanoCpus > 0:
		req.CPUs = float64(hc.NanoCpus) / 1e9
	case hc.CpuQuota > 0:
		period := hc.CpuPeriod
		if period <= 0 {
			period = 100000
		}
		req.CPUs = float64(hc.CpuQuota) / float64(period)
	}
	if hc.PidsLimit != nil && *hc.PidsLimit > 0 {
		req.Pids = *hc.PidsLimit
	}
	req.Disk = hc.StorageOpt["size"]
	req.Runtime, _ = boxdRuntime(hc.Runtime)
	req.Network = "none"
	if hc.NetworkMode == "default" || hc.NetworkMode == "bridge" || hc.NetworkMode == "" {
		if s.DefaultNetwork != "" {
			req.Network = s.DefaultNetwork
			req.Allow = s.DefaultAllow
		}
	}
	cfg.Network = req.Network
	if s.DefaultTTL > 0 {
		req.TTL = s.DefaultTTL.String()
	}
	cfg.TTL = req.TTL
	return cfg, req, nil
}

// dockerFields names boxd's create fields as Docker's.
var dockerFields = map[string]string{
	"memory": "HostConfig.Memory", "cpus": "HostConfig.NanoCpus", "pids": "HostConfig.PidsLimit",
	"disk": "HostConfig.StorageOpt.size", "env": "Env", "workdir": "WorkingDir", "labels": "Labels",
	"user": "User", "hostname": "Hostname", "runtime": "HostConfig.Runtime", "image": "Image",
	"binds": "HostConfig.Binds", "volumes": "HostConfig.Binds", "publish": "HostConfig.PortBindings",
}

// dockerField renames the field a runtime error names to Docker's.
func dockerField(err error) error {
	var fe *runtime.FieldError
	if errors.As(err, &fe) {
		name := strings.TrimPrefix(fe.Field, "limits.")
		if d, ok := dockerFields[name]; ok {
			name = d
		}
		return errf(http.StatusBadRequest, "%s: %s", name, fe.Msg)
	}
	return err
}
