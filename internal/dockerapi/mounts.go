//go:build linux

package dockerapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/containerd/errdefs"

	"github.com/boxd-dev/boxd/runtime"
)

// Binds, Mounts and PortBindings become boxd's own create fields, so
// they meet exactly the checks boxctl create meets: a host path under
// --allow-bind, opened as the caller beneath the root and ID-mapped
// (runtime's binds); a named volume boxd has; a published port on
// loopback or an address --allow-publish-address allows, never below
// ip_unprivileged_port_start for a caller who is not an admin. A refusal
// is a 400 naming the Docker field the value came from.

// mountSpec is one entry of HostConfig.Mounts.
type mountSpec struct {
	Type          string
	Source        string
	Target        string
	ReadOnly      bool
	Consistency   string
	BindOptions   json.RawMessage
	VolumeOptions json.RawMessage
	TmpfsOptions  json.RawMessage
}

// portBinding is one host side of a HostConfig.PortBindings entry.
type portBinding struct {
	HostIp   string
	HostPort string
}

// origins names the Docker field each of boxd's list entries came from:
// "binds[0]" -> "HostConfig.Mounts[2]".
type origins map[string]string

// mountRequest fills req's Binds, Volumes and Publish from the Docker
// fields, recording where each came from.
func mountRequest(hc hostConfig, req *runtime.CreateRequest) (origins, error) {
	o := origins{}
	add := func(spec, field string) {
		src, _, _ := strings.Cut(spec, ":")
		if strings.HasPrefix(src, "/") {
			o[fmt.Sprintf("binds[%d]", len(req.Binds))] = field
			req.Binds = append(req.Binds, spec)
			return
		}
		o[fmt.Sprintf("volumes[%d]", len(req.Volumes))] = field
		o["volume:"+src] = field // a missing volume's error names it, not the field
		req.Volumes = append(req.Volumes, spec)
	}
	for i, b := range hc.Binds {
		add(b, fmt.Sprintf("HostConfig.Binds[%d]", i))
	}
	for i, m := range hc.Mounts {
		field := fmt.Sprintf("HostConfig.Mounts[%d]", i)
		spec, err := mountBind(field, m)
		if err != nil {
			return nil, err
		}
		if spec != "" {
			add(spec, field)
		}
	}
	keys := make([]string, 0, len(hc.PortBindings))
	for k := range hc.PortBindings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		field := "HostConfig.PortBindings[" + strconv.Quote(k) + "]"
		port, proto, err := containerPort(k)
		if err != nil {
			return nil, errf(http.StatusBadRequest, "%s: %v", field, err)
		}
		for _, b := range hc.PortBindings[k] {
			hp := 0
			if b.HostPort != "" {
				if hp, err = strconv.Atoi(b.HostPort); err != nil {
					return nil, errf(http.StatusBadRequest, "%s: host port %q is not a number (ranges are not served)", field, b.HostPort)
				}
			}
			o[fmt.Sprintf("publish[%d]", len(req.Publish))] = field
			req.Publish = append(req.Publish, runtime.PortSpec{HostIP: b.HostIp, HostPort: hp, Port: port, Protocol: proto})
		}
	}
	return o, nil
}

// mountBind turns a Mounts entry into a bind or volume spec ("" for a
// tmpfs, ignored as HostConfig.Tmpfs is).
func mountBind(field string, m mountSpec) (string, error) {
	switch {
	case !isZero(m.BindOptions):
		return "", errf(http.StatusBadRequest, "%s.BindOptions: refused by boxd (propagation and recursion of binds are fixed)", field)
	case !isZero(m.VolumeOptions):
		return "", errf(http.StatusBadRequest, "%s.VolumeOptions: refused by boxd (volumes are made with boxctl volume create)", field)
	case m.Target == "":
		return "", errf(http.StatusBadRequest, "%s.Target: no target given", field)
	}
	ro := ""
	if m.ReadOnly {
		ro = ":ro"
	}
	switch m.Type {
	case "bind":
		if !strings.HasPrefix(m.Source, "/") {
			return "", errf(http.StatusBadRequest, "%s.Source: %q is not an absolute host path", field, m.Source)
		}
		return m.Source + ":" + m.Target + ro, nil
	case "volume":
		if m.Source == "" || strings.HasPrefix(m.Source, "/") {
			return "", errf(http.StatusBadRequest, "%s.Source: %q is not a volume name (anonymous volumes are not served)", field, m.Source)
		}
		return m.Source + ":" + m.Target + ro, nil
	case "tmpfs":
		return "", nil
	}
	return "", errf(http.StatusBadRequest, "%s.Type: %q refused: boxd serves bind, volume and tmpfs", field, m.Type)
}

// containerPort reads "80/tcp" (or "80").
func containerPort(k string) (int, string, error) {
	p, proto, _ := strings.Cut(k, "/")
	n, err := strconv.Atoi(p)
	if err != nil {
		return 0, "", fmt.Errorf("%q is not PORT[/PROTOCOL] (ranges are not served)", k)
	}
	return n, proto, nil
}

var listField = regexp.MustCompile(`(?:limits\.)?((?:binds|volumes|publish)\[\d+\])\.?`)

// originField renames an error about boxd's binds[i], volumes[i] or
// publish[i] to the Docker field it came from, as a 400.
func originField(err error, o origins) error {
	if err == nil || len(o) == 0 {
		return err
	}
	msg := strings.TrimSuffix(err.Error(), ": "+classText(err))
	loc := listField.FindStringSubmatchIndex(msg)
	if loc == nil {
		if errdefs.IsNotFound(err) {
			for k, field := range o {
				if name, ok := strings.CutPrefix(k, "volume:"); ok && strings.Contains(msg, strconv.Quote(name)) {
					return errf(http.StatusBadRequest, "%s: %s (make it with boxctl volume create)", field, msg)
				}
			}
		}
		return err
	}
	field, ok := o[msg[loc[2]:loc[3]]]
	if !ok {
		return err
	}
	rest := strings.TrimPrefix(strings.TrimPrefix(msg[loc[1]:], ":"), " ")
	return errf(http.StatusBadRequest, "%s: %s", field, rest)
}
