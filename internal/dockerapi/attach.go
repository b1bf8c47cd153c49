//go:build linux

package dockerapi

import (
	"context"
	"io"
	"net/http"
	"strings"

	"github.com/boxd-dev/boxd/agent/wire"
)

// attachContainer connects a hijacked connection to the main command: its
// output (what the init still holds, then as it comes) and, with stdin,
// its input. A client may attach before start (docker run does): the
// attach then waits for the run.
func (s *Server) attachContainer(w http.ResponseWriter, r *http.Request) {
	_, x, err := s.container(r)
	if err != nil {
		fail(w, err)
		return
	}
	stdin, stdoutOn, stderrOn := boolParam(r, "stdin"), boolParam(r, "stdout"), boolParam(r, "stderr")
	h, err := hijack(w, r, x.cfg.Tty)
	if err != nil {
		return
	}
	defer h.close()
	x.mu.Lock()
	st, started := x.st, x.started
	x.mu.Unlock()
	if st.Status != "running" {
		select {
		case <-started:
		case <-x.removed:
			return
		case <-r.Context().Done():
			return
		}
		x.mu.Lock()
		st = x.st
		x.mu.Unlock()
	}
	ctx := context.WithoutCancel(r.Context())
	ps, _, err := s.Manager.AttachProcess(ctx, x.id, wire.AttachArgs{ID: st.ProcID, Stdin: stdin})
	if err != nil {
		_, _ = streamWriter{h.out, streamStderr, x.cfg.Tty}.Write([]byte("boxd: attach: " + err.Error() + "\n"))
		return
	}
	defer ps.Close()
	if stdin {
		go func() {
			if _, err := io.Copy(ps, h.r); err == nil {
				_ = ps.CloseStdin()
			}
		}()
	}
	stdout, stderr := h.writers(x.cfg.Tty)
	if !stdoutOn {
		stdout = nil
	}
	if !stderrOn {
		stderr = nil
	}
	_, _ = ps.Output(stdout, stderr)
}

// resizeContainer is accepted and ignored: a TTY container keeps the size
// it started with.
func (s *Server) resizeContainer(w http.ResponseWriter, r *http.Request) {
	if _, _, err := s.container(r); err != nil {
		fail(w, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// pauseContainer freezes (pause) or thaws (unpause) the sandbox, as boxctl
// pause and resume do.
func (s *Server) pauseContainer(w http.ResponseWriter, r *http.Request) {
	sb, err := s.resolve(r.Context(), r.PathValue("id"))
	if err != nil {
		fail(w, err)
		return
	}
	if strings.HasSuffix(r.URL.Path, "/unpause") {
		err = s.Manager.Resume(r.Context(), sb.ID, "docker unpause")
	} else {
		err = s.Manager.Pause(r.Context(), sb.ID, "docker pause")
	}
	if err != nil {
		fail(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
