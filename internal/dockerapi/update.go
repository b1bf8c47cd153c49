//go:build linux

package dockerapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/boxd-dev/boxd/runtime"
)

// updateFieldNames are the fields of Docker's container update (its
// Resources and RestartPolicy); each takes its HostConfig row, so a field
// honoured at create is changed on the live sandbox (boxd's Update) and
// one ignored or refused there is ignored or refused here too.
var updateFieldNames = []string{"Memory", "NanoCpus", "CpuQuota", "CpuPeriod", "PidsLimit", "RestartPolicy",
	"CpuShares", "CgroupParent", "BlkioWeight", "BlkioWeightDevice", "BlkioDeviceReadBps", "BlkioDeviceWriteBps",
	"BlkioDeviceReadIOps", "BlkioDeviceWriteIOps", "CpuRealtimePeriod", "CpuRealtimeRuntime", "CpusetCpus", "CpusetMems",
	"Devices", "DeviceCgroupRules", "DeviceRequests", "KernelMemory", "KernelMemoryTCP", "MemoryReservation", "MemorySwap",
	"MemorySwappiness", "OomKillDisable", "Ulimits", "CpuCount", "CpuPercent", "IOMaximumIOps", "IOMaximumBandwidth"}

var updateFields = func() []fieldRule {
	out := make([]fieldRule, 0, len(updateFieldNames))
	for _, n := range updateFieldNames {
		r, ok := findRule(hostConfigFields, n)
		if !ok {
			panic("dockerapi: update field " + n + " has no HostConfig row")
		}
		out = append(out, r)
	}
	return out
}()

// updateBody is what update changes.
type updateBody struct {
	Memory    int64
	NanoCpus  int64
	CpuQuota  int64
	CpuPeriod int64
	PidsLimit *int64
}

func (s *Server) updateContainer(w http.ResponseWriter, r *http.Request) {
	sb, err := s.resolve(r.Context(), r.PathValue("id"))
	if err != nil {
		fail(w, err)
		return
	}
	var raw json.RawMessage
	if err := decodeBody(r, &raw); err != nil {
		fail(w, err)
		return
	}
	if err := checkFields(raw, "", updateFields); err != nil {
		fail(w, err)
		return
	}
	var b updateBody
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &b); err != nil {
			fail(w, errf(http.StatusBadRequest, "malformed JSON body: %v", err))
			return
		}
	}
	var req runtime.UpdateRequest
	if b.Memory > 0 {
		req.Memory = strconv.FormatInt(b.Memory, 10)
	}
	switch {
	case b.NanoCpus > 0:
		req.CPUs = float64(b.NanoCpus) / 1e9
	case b.CpuQuota > 0:
		period := b.CpuPeriod
		if period <= 0 {
			period = 100000
		}
		req.CPUs = float64(b.CpuQuota) / float64(period)
	}
	if b.PidsLimit != nil && *b.PidsLimit > 0 {
		req.Pids = *b.PidsLimit
	}
	if req.Memory != "" || req.CPUs > 0 || req.Pids > 0 {
		if _, err := s.Manager.Update(r.Context(), sb.ID, req); err != nil {
			err = dockerField(err)
			if he, ok := err.(*httpError); ok {
				he.msg = strings.TrimPrefix(he.msg, "HostConfig.")
			}
			fail(w, err)
			return
		}
	}
	if x := s.ctrs.lookup(s, sb.ID); x != nil && (b.CpuQuota > 0 || b.NanoCpus > 0) {
		x.mu.Lock()
		x.cfg.Host.CpuQuota, x.cfg.Host.CpuPeriod, x.cfg.Host.NanoCpus = b.CpuQuota, b.CpuPeriod, b.NanoCpus
		_ = writeJSON0(x.dir+"/config.json", x.cfg)
		x.mu.Unlock()
	}
	writeJSON(w, http.StatusOK, map[string]any{"Warnings": []string{}})
}

// renameContainer renames the sandbox (boxd's name is Docker's).
func (s *Server) renameContainer(w http.ResponseWriter, r *http.Request) {
	sb, err := s.resolve(r.Context(), r.PathValue("id"))
	if err != nil {
		fail(w, err)
		return
	}
	name := strings.TrimPrefix(r.URL.Query().Get("name"), "/")
	if _, err := s.Manager.Rename(r.Context(), sb.ID, name); err != nil {
		fail(w, err)
		return
	}
	if x := s.ctrs.lookup(s, sb.ID); x != nil {
		x.mu.Lock()
		x.cfg.Name = name
		_ = writeJSON0(x.dir+"/config.json", x.cfg)
		x.mu.Unlock()
	}
	s.actors.remember(sb.ID, func(ai *actorInfo) {
		attrs := map[string]string{"name": name} // a new map: readers may hold the old
		for k, v := range ai.attrs {
			if k != "name" {
				attrs[k] = v
			}
		}
		ai.attrs = attrs
	})
	w.WriteHeader(http.StatusNoContent)
}
