//go:build linux

package dockerapi

import (
	"encoding/base64"
	"encoding/json"
	"io/fs"
	"net/http"
	"path"

	"github.com/containerd/errdefs"

	"github.com/boxd-dev/boxd/agent/wire"
	"github.com/boxd-dev/boxd/runtime"
)

// The archive endpoints are boxd's copy-in and copy-out (boxctl cp): a tar
// PUT goes through the same checks in the init, so a hostile tar
// (traversal, links out, devices) is refused as boxctl cp refuses it.

func (s *Server) archiveRoutes(mux *http.ServeMux) {
	mux.HandleFunc("PUT /containers/{id}/archive", s.putArchive)
	mux.HandleFunc("GET /containers/{id}/archive", s.getArchive)
	mux.HandleFunc("HEAD /containers/{id}/archive", s.getArchive)
}

// pathStat is Docker's X-Docker-Container-Path-Stat.
type pathStat struct {
	Name       string      `json:"name"`
	Size       int64       `json:"size"`
	Mode       fs.FileMode `json:"mode"`
	Mtime      string      `json:"mtime"`
	LinkTarget string      `json:"linkTarget"`
}

// stat describes path in the container for the archive header; a missing
// path is Docker's 404.
func (s *Server) stat(r *http.Request, id, p string) (wire.FileStat, error) {
	if p == "" {
		return wire.FileStat{}, errf(http.StatusBadRequest, "path: required")
	}
	st, err := s.Manager.StatFile(r.Context(), id, wire.FileStatArgs{Path: p})
	if errdefs.IsNotFound(err) {
		return st, errf(http.StatusNotFound, "Could not find the file %s in container %s", p, id)
	}
	return st, dockerField(err)
}

func statHeader(w http.ResponseWriter, p string, st wire.FileStat) {
	b, _ := json.Marshal(pathStat{Name: path.Base(p), Size: st.Size, Mode: st.FileMode(),
		Mtime: dockerTime(st.Mtime), LinkTarget: st.LinkTarget})
	w.Header().Set("X-Docker-Container-Path-Stat", base64.StdEncoding.EncodeToString(b))
}

func (s *Server) getArchive(w http.ResponseWriter, r *http.Request) {
	sb, err := s.resolve(r.Context(), r.PathValue("id"))
	if err != nil {
		fail(w, err)
		return
	}
	p := r.URL.Query().Get("path")
	st, err := s.stat(r, sb.ID, p)
	if err != nil {
		fail(w, err)
		return
	}
	statHeader(w, p, st)
	if r.Method == http.MethodHead {
		w.WriteHeader(http.StatusOK)
		return
	}
	lw := &lazyWriter{w: w}
	if err := s.Manager.CopyOut(r.Context(), sb.ID, runtime.CopyOut{Path: path.Clean(p), Tar: lw}); err != nil && !lw.started {
		fail(w, dockerField(err))
	}
}

// lazyWriter sends the 200 and the tar type with the first byte, so an
// error before it can still be answered as one.
type lazyWriter struct {
	w       http.ResponseWriter
	started bool
}

func (l *lazyWriter) Write(p []byte) (int, error) {
	if !l.started {
		l.started = true
		l.w.Header().Set("Content-Type", "application/x-tar")
		l.w.WriteHeader(http.StatusOK)
	}
	return l.w.Write(p)
}

func (s *Server) putArchive(w http.ResponseWriter, r *http.Request) {
	sb, err := s.resolve(r.Context(), r.PathValue("id"))
	if err != nil {
		fail(w, err)
		return
	}
	p := r.URL.Query().Get("path")
	st, err := s.stat(r, sb.ID, p)
	if err != nil {
		fail(w, err)
		return
	}
	if st.Type != wire.FileTypeDir {
		fail(w, errf(http.StatusBadRequest, "extraction point is not a directory"))
		return
	}
	if err := s.Manager.CopyIn(r.Context(), sb.ID, runtime.CopyIn{Dest: path.Clean(p), Tar: r.Body}); err != nil {
		fail(w, dockerField(err))
		return
	}
	w.WriteHeader(http.StatusOK)
}
