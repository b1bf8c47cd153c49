//go:build linux

package dockerapi

import (
	"net/http"
	"os"
	goruntime "runtime"
	"strings"

	"golang.org/x/sys/unix"
)

func (s *Server) systemRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /_ping", s.ping)
	mux.HandleFunc("HEAD /_ping", s.ping)
	mux.HandleFunc("GET /version", s.version)
	mux.HandleFunc("GET /info", s.info)
	mux.HandleFunc("GET /events", s.systemEvents)
}

func (s *Server) ping(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-cache, no-store, must-revalidate")
	w.Header().Set("Pragma", "no-cache")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write([]byte("OK"))
	}
}

func kernelVersion() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}

func (s *Server) version(w http.ResponseWriter, r *http.Request) {
	v := s.Version
	if v == "" {
		v = "dev"
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"Platform":      map[string]string{"Name": "boxd"},
		"Components":    []map[string]any{{"Name": "boxd", "Version": v}},
		"Version":       v,
		"ApiVersion":    MaxVersion,
		"MinAPIVersion": MinVersion,
		"Os":            "linux",
		"Arch":          goruntime.GOARCH,
		"KernelVersion": kernelVersion(),
		"GoVersion":     goruntime.Version(),
		"GitCommit":     "",
		"BuildTime":     "",
	})
}

func (s *Server) info(w http.ResponseWriter, r *http.Request) {
	sbs, err := s.Manager.List(r.Context(), nil)
	if err != nil {
		fail(w, err)
		return
	}
	running, stopped := 0, 0
	for _, sb := range sbs {
		st := s.ctrs.status(s, sb)
		if st == "running" {
			running++
		} else {
			stopped++
		}
	}
	nImages := 0
	if ims, err := s.Images.List(r.Context()); err == nil {
		nImages = len(ims)
	}
	host, _ := os.Hostname()
	writeJSON(w, http.StatusOK, map[string]any{
		"ID":                "boxd",
		"Containers":        len(sbs),
		"ContainersRunning": running,
		"ContainersPaused":  0,
		"ContainersStopped": stopped,
		"Images":            nImages,
		"Driver":            s.Images.Snapshotter(),
		"Name":              host,
		"ServerVersion":     s.Version,
		"OSType":            "linux",
		"OperatingSystem":   "boxd",
		"Architecture":      strings.ReplaceAll(goruntime.GOARCH, "amd64", "x86_64"),
		"KernelVersion":     kernelVersion(),
		"NCPU":              goruntime.NumCPU(),
		"MemTotal":          memTotal(),
		"DefaultRuntime":    "runc",
		"Runtimes":          map[string]any{"runc": map[string]string{"path": "runc"}, "runsc": map[string]string{"path": "runsc"}},
		"SecurityOptions":   []string{"name=seccomp,profile=builtin", "name=userns", "name=no-new-privileges"},
		"CgroupDriver":      "cgroupfs",
		"LoggingDriver":     "boxd",
		"Labels":            []string{},
		"Warnings":          []string{},
	})
}

func memTotal() int64 {
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) != nil {
		return 0
	}
	return int64(si.Totalram) * int64(si.Unit)
}
