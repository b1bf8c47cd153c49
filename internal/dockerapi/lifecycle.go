//go:build linux

package dockerapi

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/containerd/errdefs"

	"github.com/boxd-dev/boxd/agent/wire"
	"github.com/boxd-dev/boxd/runtime"
)

// container resolves the caller's container made through this endpoint.
func (s *Server) container(r *http.Request) (*runtime.Sandbox, *ctr, error) {
	sb, err := s.resolve(r.Context(), r.PathValue("id"))
	if err != nil {
		return nil, nil, err
	}
	x := s.ctrs.lookup(s, sb.ID)
	if x == nil {
		return sb, nil, errf(http.StatusConflict, "container %s was not made through the Docker endpoint: use boxctl for it", sb.ID)
	}
	return sb, x, nil
}

func (s *Server) startContainer(w http.ResponseWriter, r *http.Request) {
	sb, x, err := s.container(r)
	if err != nil {
		fail(w, err)
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.st.Status == "running" {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	ctx := r.Context()
	if sb.State != "running" {
		if _, err := s.Manager.Start(ctx, sb.ID); err != nil {
			fail(w, err)
			return
		}
	}
	spec := wire.ProcessSpec{ExecRequest: wire.ExecRequest{Args: x.cfg.Args, StdinStream: x.cfg.OpenStdin,
		OutputLimit: wire.NoOutputLimit}, Tty: x.cfg.Tty}
	info, err := s.Manager.StartProcess(ctx, sb.ID, spec)
	if err != nil {
		fail(w, dockerField(err))
		return
	}
	x.st = ctrState{Status: "running", ProcID: info.ID, Pid: info.PID, StartedAt: time.Now().UTC(), Owner: x.st.Owner}
	_ = x.save()
	close(x.started)
	x.started = make(chan struct{})
	caller, _ := runtime.CallerFrom(ctx)
	go s.follow(runtime.WithCaller(context.Background(), caller), x, info.ID, x.exited, [3]int64{})
	w.WriteHeader(http.StatusNoContent)
}

// follow keeps the main command's output in the container's log until it
// exits, then records its exit and stops the sandbox (deletes it with
// AutoRemove), as Docker's container ends with its main process.
func (s *Server) follow(ctx context.Context, x *ctr, procID string, exited chan struct{}, skip [3]int64) {
	defer close(exited)
	res, err := s.copyLog(ctx, x, procID, skip)
	x.mu.Lock()
	gone := x.gone
	// The exit is known before the sandbox stops: its die event reads it.
	if err != nil {
		x.st.ExitCode, x.st.Error = 255, err.Error()
	} else {
		x.st.ExitCode, x.st.OOMKilled = exitCode(res), res.OOMKilled
	}
	code := x.st.ExitCode
	x.mu.Unlock()
	s.actors.remember(x.id, func(ai *actorInfo) { ai.exitCode = &code })
	if !gone && !x.cfg.Host.AutoRemove {
		// Stopped before the exit is reported: whoever waits finds the
		// container as Docker leaves it.
		if _, serr := s.Manager.Stop(ctx, x.id, 0); errdefs.IsNotFound(serr) {
			gone = true // expired or deleted meanwhile
		} else if serr != nil {
			s.Log.Debug("docker: stop after the main command exited", "container", x.id, "err", serr)
		}
	}
	x.mu.Lock()
	x.st.Status, x.st.FinishedAt = "exited", time.Now().UTC()
	if !gone {
		_ = x.save()
	}
	x.exited = make(chan struct{})
	x.mu.Unlock()
	switch {
	case gone:
		s.ctrs.drop(s, x)
	case x.cfg.Host.AutoRemove:
		if err := s.Manager.Delete(ctx, x.id); err != nil && !errdefs.IsNotFound(err) {
			s.Log.Warn("docker: auto-remove", "container", x.id, "err", err)
		}
		s.ctrs.drop(s, x)
	}
}

// exitCode is Docker's: the status, or 128 plus the signal that killed it.
func exitCode(res wire.ExecResult) int {
	if res.Signal != "" {
		if sig, err := wire.ParseSignal(res.Signal); err == nil {
			return 128 + int(sig)
		}
	}
	return res.ExitCode
}

func (s *Server) signalMain(ctx context.Context, x *ctr, sig string) error {
	x.mu.Lock()
	st := x.st
	x.mu.Unlock()
	if st.Status != "running" {
		return errf(http.StatusConflict, "Container %s is not running", x.id)
	}
	_, err := s.Manager.SignalProcess(ctx, x.id, st.ProcID, sig)
	return err
}

// exitedChan is the channel closed when the current run ends.
func (x *ctr) exitedChan() (chan struct{}, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.exited, x.st.Status == "running"
}

func (s *Server) stopContainer(w http.ResponseWriter, r *http.Request) {
	_, x, err := s.container(r)
	if err != nil {
		fail(w, err)
		return
	}
	ch, running := x.exitedChan()
	if !running {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	grace := 10 * time.Second
	if x.cfg.StopTimeout != nil {
		grace = time.Duration(*x.cfg.StopTimeout) * time.Second
	}
	if t, err := strconv.Atoi(r.URL.Query().Get("t")); err == nil {
		grace = time.Duration(t) * time.Second
	}
	sig := x.cfg.StopSignal
	if q := r.URL.Query().Get("signal"); q != "" {
		sig = q
	}
	if sig == "" {
		sig = "SIGTERM"
	}
	if grace > 0 {
		if err := s.signalMain(r.Context(), x, sig); err != nil {
			fail(w, dockerField(err))
			return
		}
	}
	select {
	case <-ch:
	case <-time.After(max(grace, 0)):
		_ = s.signalMain(r.Context(), x, "SIGKILL")
		<-ch
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) killContainer(w http.ResponseWriter, r *http.Request) {
	_, x, err := s.container(r)
	if err != nil {
		fail(w, err)
		return
	}
	sig := r.URL.Query().Get("signal")
	if sig == "" {
		sig = "SIGKILL"
	}
	if err := s.signalMain(r.Context(), x, sig); err != nil {
		fail(w, dockerField(err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// waitContainer answers Docker's wait: the header goes out at once (a
// client that waits before it starts the container needs it), the exit
// status once the condition holds.
func (s *Server) waitContainer(w http.ResponseWriter, r *http.Request) {
	_, x, err := s.container(r)
	if err != nil {
		fail(w, err)
		return
	}
	cond := r.URL.Query().Get("condition")
	switch cond {
	case "", "not-running", "next-exit", "removed":
	default:
		fail(w, errf(http.StatusBadRequest, "invalid condition: %q", cond))
		return
	}
	ch, running := x.exitedChan()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	flushWriter{w}.Write(nil)
	if running || cond == "next-exit" || (cond == "removed" && !x.cfg.Host.AutoRemove) {
		select {
		case <-ch:
		case <-x.removed:
		case <-r.Context().Done():
			return
		}
	}
	if cond == "removed" {
		select {
		case <-x.removed:
		case <-r.Context().Done():
			return
		}
	}
	x.mu.Lock()
	code, msg := x.st.ExitCode, x.st.Error
	x.mu.Unlock()
	body := map[string]any{"StatusCode": code}
	if msg != "" {
		body["Error"] = map[string]string{"Message": msg}
	}
	writeBody(w, body)
}

func (s *Server) removeContainer(w http.ResponseWriter, r *http.Request) {
	sb, err := s.resolve(r.Context(), r.PathValue("id"))
	if err != nil {
		fail(w, err)
		return
	}
	x := s.ctrs.lookup(s, sb.ID)
	running := sb.State == "running"
	if x != nil {
		_, running = x.exitedChan()
	}
	if running && !boolParam(r, "force") {
		fail(w, errf(http.StatusConflict, "You cannot remove a running container %s. Stop the container before attempting removal or force remove", sb.ID))
		return
	}
	if x != nil {
		x.mu.Lock()
		x.gone = true
		x.mu.Unlock()
	}
	if err := s.Manager.Delete(r.Context(), sb.ID); err != nil {
		fail(w, err)
		return
	}
	if x != nil {
		s.ctrs.drop(s, x)
	}
	w.WriteHeader(http.StatusNoContent)
}
