//go:build linux

package dockerapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/docker/go-units"

	"github.com/boxd-dev/boxd/runtime"
)

// view is what inspect and list show of one container.
type view struct {
	sb  *runtime.Sandbox
	cfg ctrConfig
	st  ctrState
}

func (s *Server) viewOf(sb *runtime.Sandbox) view {
	v := view{sb: sb}
	if x := s.ctrs.lookup(s, sb.ID); x != nil {
		x.mu.Lock()
		v.cfg, v.st = x.cfg, x.st
		x.mu.Unlock()
		if !sb.PausedAt.IsZero() && v.st.Status == "running" {
			v.st.Status = "paused"
		}
		return v
	}
	// A sandbox made without Docker: running is its init.
	v.cfg = ctrConfig{Name: sb.Name, Created: sb.CreatedAt, Image: sb.Image, Env: sb.Env, WorkingDir: sb.Workdir, User: sb.User,
		Labels: sb.Labels, Host: hostConfig{NetworkMode: "none"}}
	v.st = ctrState{Status: "exited", StartedAt: sb.CreatedAt, Pid: int(sb.InitPID)}
	if sb.State == "running" {
		v.st.Status = "running"
	}
	return v
}

func (v view) name() string {
	if v.sb.Name != "" {
		return "/" + v.sb.Name
	}
	return "/" + v.sb.ID
}

func (v view) stateJSON() map[string]any {
	st := v.st
	return map[string]any{
		"Status": st.Status, "Running": st.Status == "running" || st.Status == "paused", "Paused": st.Status == "paused", "Restarting": false,
		"OOMKilled": st.OOMKilled, "Dead": false, "Pid": st.Pid, "ExitCode": st.ExitCode, "Error": st.Error,
		"StartedAt": dockerTime(st.StartedAt), "FinishedAt": dockerTime(st.FinishedAt),
	}
}

// dockerTime is Docker's time format; the zero time as Docker spells it.
func dockerTime(t time.Time) string {
	if t.IsZero() {
		return "0001-01-01T00:00:00Z"
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func (v view) hostConfigJSON() map[string]any {
	h, sb := v.cfg.Host, v.sb
	pids := sb.Limits.Pids
	nano := int64(sb.Limits.CPUs * 1e9)
	netMode := h.NetworkMode
	if netMode == "" {
		netMode = "default"
	}
	restart := h.RestartPolicy.Name
	if restart == "" {
		restart = "no"
	}
	return map[string]any{
		"Memory": sb.Limits.MemoryBytes, "NanoCpus": nano, "CpuQuota": h.CpuQuota, "CpuPeriod": h.CpuPeriod, "PidsLimit": pids,
		"AutoRemove": h.AutoRemove, "ReadonlyRootfs": sb.Tunables.ReadOnly, "NetworkMode": netMode,
		"RestartPolicy": map[string]any{"Name": restart, "MaximumRetryCount": 0},
		"StorageOpt":    storageOpt(sb), "Runtime": runtimeName(sb), "Privileged": false,
		"CapAdd": nil, "CapDrop": nil, "Binds": h.Binds, "PortBindings": portBindings(sb), "LogConfig": map[string]any{"Type": "boxd", "Config": map[string]string{}},
		"SecurityOpt": []string{"no-new-privileges"}, "UsernsMode": "", "PidMode": "", "IpcMode": "private",
	}
}

func storageOpt(sb *runtime.Sandbox) map[string]string {
	if sb.Limits.DiskBytes <= 0 {
		return nil
	}
	return map[string]string{"size": strconv.FormatInt(sb.Limits.DiskBytes, 10)}
}

func runtimeName(sb *runtime.Sandbox) string {
	if sb.Runtime.Name == runtime.RuntimeGvisor {
		return "runsc"
	}
	return "runc"
}

func (v view) configJSON() map[string]any {
	c := v.cfg
	hostname := c.Hostname
	if hostname == "" {
		hostname = v.sb.Tunables.Hostname
	}
	if hostname == "" {
		hostname = v.sb.ID
	}
	labels := v.sb.Labels
	if labels == nil {
		labels = map[string]string{}
	}
	return map[string]any{
		"Hostname": hostname, "User": c.User, "Tty": c.Tty, "OpenStdin": c.OpenStdin, "Env": v.sb.Env,
		"Cmd": c.Cmd, "Entrypoint": c.Entrypoint, "Image": c.Image, "WorkingDir": c.WorkingDir, "Labels": labels,
		"StopSignal": c.StopSignal, "StopTimeout": c.StopTimeout, "AttachStdin": false, "AttachStdout": false, "AttachStderr": false,
	}
}

func (s *Server) inspectContainer(w http.ResponseWriter, r *http.Request) {
	sb, err := s.resolve(r.Context(), r.PathValue("id"))
	if err != nil {
		fail(w, err)
		return
	}
	v := s.viewOf(sb)
	var path string
	var args []string
	if len(v.cfg.Args) > 0 {
		path, args = v.cfg.Args[0], v.cfg.Args[1:]
	}
	boxd := map[string]any{"Runtime": sb.Runtime.Name, "Network": v.cfg.Network, "TTL": v.cfg.TTL,
		"ExpiresAt": dockerTime(sb.ExpiresAt), "Owner": sb.OwnerUID, "SandboxState": sb.State}
	writeJSON(w, http.StatusOK, map[string]any{
		"Id": sb.ID, "Created": dockerTime(v.cfg.Created), "Path": path, "Args": args, "State": v.stateJSON(),
		"Image": sb.Image, "Name": v.name(), "RestartCount": 0, "Driver": "overlayfs", "Platform": "linux",
		"HostConfig": v.hostConfigJSON(), "Config": v.configJSON(), "Mounts": mountsJSON(sb),
		"NetworkSettings": map[string]any{"Networks": map[string]any{}, "Ports": portBindings(sb)},
		"Boxd":            boxd,
	})
}

// filters reads Docker's filters parameter in either of its shapes:
// {"label":["a=b"]} or the older {"label":{"a=b":true}}.
func filters(r *http.Request) (map[string][]string, error) {
	raw := r.URL.Query().Get("filters")
	out := map[string][]string{}
	if raw == "" {
		return out, nil
	}
	if json.Unmarshal([]byte(raw), &out) == nil {
		return out, nil
	}
	var old map[string]map[string]bool
	if err := json.Unmarshal([]byte(raw), &old); err != nil {
		return nil, errf(http.StatusBadRequest, "filters: malformed: %v", err)
	}
	for k, m := range old {
		for v, on := range m {
			if on {
				out[k] = append(out[k], v)
			}
		}
	}
	return out, nil
}

// matches applies the container filters boxd serves: label, name, id,
// status; any other is a 400.
func matches(f map[string][]string, v view) (bool, error) {
	for key, vals := range f {
		ok := false
		for _, want := range vals {
			switch key {
			case "label":
				k, val, hasVal := strings.Cut(want, "=")
				got, present := v.sb.Labels[k]
				ok = ok || (present && (!hasVal || got == val))
			case "name":
				ok = ok || strings.Contains(v.name(), strings.TrimPrefix(want, "/"))
			case "id":
				ok = ok || strings.HasPrefix(v.sb.ID, want)
			case "status":
				ok = ok || v.st.Status == want
			default:
				return false, errf(http.StatusBadRequest, "invalid filter '%s'", key)
			}
		}
		if !ok {
			return false, nil
		}
	}
	return true, nil
}

func (s *Server) listContainers(w http.ResponseWriter, r *http.Request) {
	f, err := filters(r)
	if err != nil {
		fail(w, err)
		return
	}
	sbs, err := s.Manager.List(r.Context(), nil)
	if err != nil {
		fail(w, err)
		return
	}
	all := boolParam(r, "all")
	out := []map[string]any{}
	sort.Slice(sbs, func(i, j int) bool { return sbs[i].CreatedAt.After(sbs[j].CreatedAt) })
	for _, sb := range sbs {
		v := s.viewOf(sb)
		if !all && v.st.Status != "running" && len(f["status"]) == 0 {
			continue
		}
		if ok, err := matches(f, v); err != nil {
			fail(w, err)
			return
		} else if !ok {
			continue
		}
		out = append(out, v.listJSON())
	}
	if n, err := strconv.Atoi(r.URL.Query().Get("limit")); err == nil && n > 0 && n < len(out) {
		out = out[:n]
	}
	writeJSON(w, http.StatusOK, out)
}

func (v view) listJSON() map[string]any {
	labels := v.sb.Labels
	if labels == nil {
		labels = map[string]string{}
	}
	return map[string]any{
		"Id": v.sb.ID, "Names": []string{v.name()}, "Image": v.sb.Image, "ImageID": "", "Command": strings.Join(v.cfg.Args, " "),
		"Created": v.cfg.Created.Unix(), "State": v.st.Status, "Status": v.statusText(), "Labels": labels, "Ports": listPorts(v.sb),
		"HostConfig":      map[string]string{"NetworkMode": v.cfg.Host.NetworkMode},
		"NetworkSettings": map[string]any{"Networks": map[string]any{}}, "Mounts": mountsJSON(v.sb),
	}
}

// portBindings is Docker's port map of the sandbox's published ports.
func portBindings(sb *runtime.Sandbox) map[string][]map[string]string {
	out := map[string][]map[string]string{}
	for _, p := range sb.Ports {
		k := strconv.Itoa(p.Port) + "/" + p.Protocol
		out[k] = append(out[k], map[string]string{"HostIp": p.HostIP, "HostPort": strconv.Itoa(p.HostPort)})
	}
	return out
}

func listPorts(sb *runtime.Sandbox) []map[string]any {
	out := []map[string]any{}
	for _, p := range sb.Ports {
		out = append(out, map[string]any{"IP": p.HostIP, "PrivatePort": p.Port, "PublicPort": p.HostPort, "Type": p.Protocol})
	}
	return out
}

// mountsJSON is Docker's Mounts of the sandbox's binds and volumes.
func mountsJSON(sb *runtime.Sandbox) []map[string]any {
	out := []map[string]any{}
	for _, b := range sb.Binds {
		out = append(out, map[string]any{"Type": "bind", "Source": b.Source, "Destination": b.Path, "Mode": "",
			"RW": !b.ReadOnly, "Propagation": "rprivate"})
	}
	for _, v := range sb.Volumes {
		out = append(out, map[string]any{"Type": "volume", "Name": v.Name, "Source": "", "Destination": v.Path,
			"Driver": "boxd", "Mode": "", "RW": !v.ReadOnly, "Propagation": ""})
	}
	return out
}

// statusText is Docker's human status: "Up 5 seconds", "Exited (0) 3
// seconds ago", "Created".
func (v view) statusText() string {
	switch v.st.Status {
	case "running":
		return "Up " + units.HumanDuration(time.Since(v.st.StartedAt))
	case "exited":
		return fmt.Sprintf("Exited (%d) %s ago", v.st.ExitCode, units.HumanDuration(time.Since(v.st.FinishedAt)))
	}
	return "Created"
}
