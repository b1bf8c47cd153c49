//go:build linux

package dockerapi

import (
	"bufio"
	"context"
	"net/http"
	"os"
	goruntime "runtime"
	"strconv"
	"strings"
	"time"

	"github.com/boxd-dev/boxd/runtime"
)

// Stats in Docker's JSON shape, from boxd's own sample of the sandbox
// (runtime.Manager.Stats, the figures boxctl stats shows). One sample a
// second when streamed; stream=false takes two samples a second apart so
// the CPU figures have a base, as Docker does, and one-shot one sample.

func (s *Server) containerStats(w http.ResponseWriter, r *http.Request) {
	sb, err := s.resolve(r.Context(), r.PathValue("id"))
	if err != nil {
		fail(w, err)
		return
	}
	stream := r.URL.Query().Get("stream") == "" || boolParam(r, "stream")
	oneShot := boolParam(r, "one-shot")
	if oneShot && stream {
		fail(w, errf(http.StatusBadRequest, "cannot have stream=true and one-shot=true"))
		return
	}
	prev, err := s.statsSample(r.Context(), sb)
	if err != nil {
		fail(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if oneShot {
		writeBody(w, prev.json(statsSample{}))
		return
	}
	if stream {
		_ = writeBody0(flushWriter{w}, prev.json(statsSample{}))
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
		cur, err := s.statsSample(r.Context(), sb)
		if err != nil {
			return // gone: Docker ends the stream
		}
		if err := writeBody0(flushWriter{w}, cur.json(prev)); err != nil || !stream {
			return
		}
		prev = cur
	}
}

// statsSample is one sample with what Docker's CPU figures need beside it.
type statsSample struct {
	runtime.Stats
	name      string
	system    uint64 // host CPU time in ns (/proc/stat), Docker's system_cpu_usage
	pidsLimit int64
	at        time.Time
}

func (s *Server) statsSample(ctx context.Context, sb *runtime.Sandbox) (statsSample, error) {
	sts, err := s.Manager.Stats(ctx, []string{sb.ID})
	if err != nil {
		return statsSample{}, err
	}
	if len(sts) != 1 {
		return statsSample{}, errf(http.StatusNotFound, "No such container: %s", sb.ID)
	}
	v := view{sb: sb}
	return statsSample{Stats: sts[0], name: v.name(), system: systemCPU(), pidsLimit: sb.Limits.Pids, at: time.Now()}, nil
}

// json is Docker's stats object of st, prev its base (zero: none).
func (st statsSample) json(prev statsSample) map[string]any {
	u := st.Usage
	limit := u.MemoryLimit
	if st.MemoryLimit > 0 {
		limit = uint64(st.MemoryLimit)
	}
	nets := map[string]any{}
	if u.Network {
		nets["eth0"] = map[string]uint64{"rx_bytes": u.NetRxBytes, "tx_bytes": u.NetTxBytes, "rx_packets": 0, "tx_packets": 0,
			"rx_errors": 0, "tx_errors": 0, "rx_dropped": 0, "tx_dropped": 0}
	}
	out := map[string]any{
		"id": st.ID, "name": st.name, "read": dockerTime(st.at), "preread": dockerTime(prev.at),
		"pids_stats": map[string]any{"current": u.Pids, "limit": st.pidsLimit},
		"blkio_stats": map[string]any{"io_service_bytes_recursive": []map[string]any{
			{"major": 0, "minor": 0, "op": "read", "value": u.BlockReadBytes},
			{"major": 0, "minor": 0, "op": "write", "value": u.BlockWriteBytes}}},
		"num_procs": 0, "storage_stats": map[string]any{},
		"cpu_stats": cpuJSON(st), "precpu_stats": cpuJSON(prev),
		"memory_stats": map[string]any{"usage": u.MemoryBytes, "max_usage": u.MemoryPeak, "limit": limit,
			"failcnt": u.OOMKills, "stats": map[string]any{}},
		"networks": nets,
	}
	return out
}

func cpuJSON(st statsSample) map[string]any {
	if st.at.IsZero() {
		return map[string]any{"cpu_usage": map[string]any{"total_usage": 0, "usage_in_kernelmode": 0, "usage_in_usermode": 0},
			"throttling_data": map[string]any{"periods": 0, "throttled_periods": 0, "throttled_time": 0}}
	}
	return map[string]any{
		"cpu_usage":        map[string]any{"total_usage": st.Usage.CPUUsec * 1000, "usage_in_kernelmode": 0, "usage_in_usermode": 0},
		"system_cpu_usage": st.system, "online_cpus": goruntime.NumCPU(),
		"throttling_data": map[string]any{"periods": 0, "throttled_periods": 0, "throttled_time": 0},
	}
}

// systemCPU is the host's CPU time in nanoseconds as Docker reads it: the
// sum of /proc/stat's cpu line, in clock ticks of 1/100 s.
func systemCPU() uint64 {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 8 || fields[0] != "cpu" {
			continue
		}
		var ticks uint64
		for _, v := range fields[1:8] {
			n, _ := strconv.ParseUint(v, 10, 64)
			ticks += n
		}
		return ticks * uint64(time.Second/100)
	}
	return 0
}
