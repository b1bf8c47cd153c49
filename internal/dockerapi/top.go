//go:build linux

package dockerapi

import (
	"context"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/boxd-dev/boxd/agent/wire"
)

// maxTopProcs bounds the processes top reads (two file reads each).
const maxTopProcs = 512

var topTitles = []string{"UID", "PID", "PPID", "STAT", "TIME", "CMD"}

// containerTop lists the container's processes as Docker's top does,
// read from the sandbox's own /proc through boxd's init (no host ps runs
// over a sandbox's files): PIDs are the sandbox's. ps_args other than
// ps's defaults are a 400, since no ps runs.
func (s *Server) containerTop(w http.ResponseWriter, r *http.Request) {
	sb, err := s.resolve(r.Context(), r.PathValue("id"))
	if err != nil {
		fail(w, err)
		return
	}
	switch a := r.URL.Query().Get("ps_args"); a {
	case "", "-ef", "aux", "-e", "-f":
	default:
		fail(w, errf(http.StatusBadRequest, "ps_args: boxd reads the sandbox's /proc and runs no ps, so it takes no ps_args but -ef (got %q)", a))
		return
	}
	if sb.State != "running" {
		fail(w, errf(http.StatusConflict, "Container %s is not running", sb.ID))
		return
	}
	procs, err := s.sandboxProcs(r.Context(), sb.ID)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"Titles": topTitles, "Processes": procs})
}

// sandboxProcs reads each process of the sandbox's /proc, but boxd's init.
func (s *Server) sandboxProcs(ctx context.Context, id string) ([][]string, error) {
	var pids []wire.FileStat
	err := s.Manager.ListDir(ctx, id, wire.FileListArgs{Path: "/proc"}, func(st []wire.FileStat) error {
		for _, e := range st {
			if _, err := strconv.Atoi(e.Name); err == nil && e.Type == "dir" && len(pids) < maxTopProcs {
				pids = append(pids, e)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(pids, func(i, j int) bool { return atoi(pids[i].Name) < atoi(pids[j].Name) })
	out := [][]string{}
	for _, p := range pids {
		stat, err1 := s.readSmall(ctx, id, "/proc/"+p.Name+"/stat")
		cmd, err2 := s.readSmall(ctx, id, "/proc/"+p.Name+"/cmdline")
		if err1 != nil || err2 != nil {
			continue // exited while we listed
		}
		row, ok := topRow(p, stat, cmd)
		if ok {
			out = append(out, row)
		}
	}
	return out, nil
}

// topRow makes one row from /proc/PID/stat and cmdline; boxd's init (the
// sandbox's PID 1) is left out, as Docker's top leaves out the shim.
func topRow(p wire.FileStat, stat, cmdline string) ([]string, bool) {
	// stat: pid (comm) state ppid ... utime(14) stime(15): comm may
	// hold spaces and parentheses, so split after its last ')'.
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return nil, false
	}
	comm := stat[strings.IndexByte(stat, '(')+1 : i]
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return nil, false
	}
	args := strings.TrimRight(strings.ReplaceAll(cmdline, "\x00", " "), " ")
	if args == "" {
		args = "[" + comm + "]"
	}
	if p.Name == "1" && strings.HasPrefix(args, wire.InitPath) {
		return nil, false
	}
	ticks := atoi(f[11]) + atoi(f[12])
	secs := ticks / 100
	tm := strconv.Itoa(secs/3600) + ":" + pad2(secs/60%60) + ":" + pad2(secs%60)
	return []string{strconv.FormatUint(uint64(p.UID), 10), p.Name, f[1], f[0], tm, args}, true
}

func pad2(n int) string {
	if n < 10 {
		return "0" + strconv.Itoa(n)
	}
	return strconv.Itoa(n)
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// readSmall reads at most 4 KiB of a file in the sandbox.
func (s *Server) readSmall(ctx context.Context, id, path string) (string, error) {
	st, err := s.Manager.ReadFile(ctx, id, wire.FileReadArgs{Path: path, Length: 4096})
	if err != nil {
		return "", err
	}
	defer st.Close()
	b, err := io.ReadAll(io.LimitReader(st, 4096))
	return string(b), err
}
