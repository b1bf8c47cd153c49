//go:build linux

package dockerapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/boxd-dev/boxd/agent/wire"
	"github.com/boxd-dev/boxd/runtime"
)

// maxExecs bounds the exec instances kept for inspect; past it the oldest
// finished ones go.
const maxExecs = 1024

type execBody struct {
	Cmd          []string
	Env          []string
	WorkingDir   string
	User         string
	Tty          bool
	AttachStdin  bool
	AttachStdout bool
	AttachStderr bool
}

// execInst is one exec instance: made by exec create, run once by start.
type execInst struct {
	id, ctr string
	owner   uint32
	body    execBody
	created time.Time

	mu       sync.Mutex
	started  bool
	running  bool
	exitCode *int
	pid      int
}

type execs struct {
	mu sync.Mutex
	by map[string]*execInst
}

func (e *execs) init() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.by == nil {
		e.by = map[string]*execInst{}
	}
}

func (e *execs) add(x *execInst) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.by) >= maxExecs {
		var oldest *execInst
		for _, y := range e.by {
			y.mu.Lock()
			done := !y.running
			y.mu.Unlock()
			if done && (oldest == nil || y.created.Before(oldest.created)) {
				oldest = y
			}
		}
		if oldest != nil {
			delete(e.by, oldest.id)
		}
	}
	e.by[x.id] = x
}

// get returns the caller's exec instance; another user's is "No such exec
// instance", as a missing one is.
func (e *execs) get(ctx context.Context, id string) (*execInst, error) {
	e.mu.Lock()
	x, ok := e.by[id]
	e.mu.Unlock()
	c, _ := runtime.CallerFrom(ctx)
	if !ok || (x.owner != c.UID && !c.Admin) {
		return nil, errf(http.StatusNotFound, "No such exec instance: %s", id)
	}
	return x, nil
}

func (s *Server) execRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /containers/{id}/exec", s.createExec)
	mux.HandleFunc("POST /exec/{id}/start", s.startExec)
	mux.HandleFunc("GET /exec/{id}/json", s.inspectExec)
}

func (s *Server) createExec(w http.ResponseWriter, r *http.Request) {
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
	if err := checkFields(raw, "", execFields); err != nil {
		fail(w, err)
		return
	}
	var body execBody
	if err := json.Unmarshal(raw, &body); err != nil {
		fail(w, errf(http.StatusBadRequest, "malformed JSON body: %v", err))
		return
	}
	if len(body.Cmd) == 0 {
		fail(w, errf(http.StatusBadRequest, "Cmd: no exec command specified"))
		return
	}
	if s.viewOf(sb).st.Status != "running" {
		fail(w, errf(http.StatusConflict, "Container %s is not running", sb.ID))
		return
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	c, _ := runtime.CallerFrom(r.Context())
	x := &execInst{id: hex.EncodeToString(b), ctr: sb.ID, owner: c.UID, body: body, created: time.Now()}
	s.execs.add(x)
	writeJSON(w, http.StatusCreated, map[string]string{"Id": x.id})
}

func (s *Server) startExec(w http.ResponseWriter, r *http.Request) {
	x, err := s.execs.get(r.Context(), r.PathValue("id"))
	if err != nil {
		fail(w, err)
		return
	}
	var opts struct{ Detach, Tty bool }
	if err := decodeBody(r, &opts); err != nil {
		fail(w, err)
		return
	}
	x.mu.Lock()
	if x.started {
		x.mu.Unlock()
		fail(w, errf(http.StatusConflict, "exec %s has already been started", x.id))
		return
	}
	x.started, x.running = true, true
	x.mu.Unlock()
	b := x.body
	spec := wire.ProcessSpec{ExecRequest: wire.ExecRequest{Args: b.Cmd, Env: b.Env, Dir: b.WorkingDir, User: b.User,
		StdinStream: b.AttachStdin && !opts.Detach}, Tty: b.Tty}
	// A detached command outlives the call; an attached one ends with its
	// connection, which the hijack takes out of net/http's hands.
	ctx := context.WithoutCancel(r.Context())
	if opts.Detach {
		ps, err := s.Manager.ExecProcess(ctx, x.ctr, spec)
		if err != nil {
			x.finish(126, 0)
			fail(w, dockerField(err))
			return
		}
		go func() {
			defer ps.Close()
			res, err := ps.Output(nil, nil)
			x.result(res, err)
		}()
		w.WriteHeader(http.StatusOK)
		return
	}
	// The header goes out before the command starts: a client that reads
	// the response through a buffer (docker-py) would otherwise lose
	// output that arrives with the header.
	h, err := hijack(w, r, b.Tty)
	if err != nil {
		x.finish(126, 0)
		return
	}
	defer h.close()
	ps, err := s.Manager.ExecProcess(ctx, x.ctr, spec)
	if err != nil {
		x.finish(126, 0)
		_, _ = streamWriter{h.out, streamStderr, b.Tty}.Write([]byte("boxd: exec: " + dockerField(err).Error() + "\n"))
		return
	}
	defer ps.Close()
	if b.AttachStdin {
		go func() {
			if _, err := io.Copy(ps, h.r); err != nil {
				ps.Close() // the client is gone
				return
			}
			_ = ps.CloseStdin()
		}()
	}
	stdout, stderr := h.writers(b.Tty)
	if !b.AttachStdout {
		stdout = nil
	}
	if !b.AttachStderr {
		stderr = nil
	}
	res, err := ps.Output(stdout, stderr)
	x.result(res, err)
}

func (x *execInst) result(res wire.ExecResult, err error) {
	if err != nil {
		slog.Debug("docker exec", "exec", x.id, "container", x.ctr, "err", err)
		x.finish(126, res.PID)
		return
	}
	x.finish(exitCode(res), res.PID)
}

func (x *execInst) finish(code, pid int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.running, x.exitCode = false, &code
	if pid != 0 {
		x.pid = pid
	}
}

func (s *Server) inspectExec(w http.ResponseWriter, r *http.Request) {
	x, err := s.execs.get(r.Context(), r.PathValue("id"))
	if err != nil {
		fail(w, err)
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	b := x.body
	var args []string
	if len(b.Cmd) > 1 {
		args = b.Cmd[1:]
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"ID": x.id, "ContainerID": x.ctr, "Running": x.running, "ExitCode": x.exitCode, "Pid": x.pid,
		"OpenStdin": b.AttachStdin, "OpenStdout": b.AttachStdout, "OpenStderr": b.AttachStderr, "CanRemove": false,
		"DetachKeys": "", "ProcessConfig": map[string]any{"tty": b.Tty, "entrypoint": b.Cmd[0], "arguments": args,
			"privileged": false, "user": b.User},
	})
}
