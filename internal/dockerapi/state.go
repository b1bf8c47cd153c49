//go:build linux

package dockerapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"time"

	"github.com/containerd/errdefs"

	"github.com/boxd-dev/boxd/runtime"
)

// What boxd keeps of a container made here, beside its sandbox, in
// StateDir/ID: config.json (what create asked for, resolved), state.json
// (the main command's runs) and log (its output). A sandbox with no such
// directory (made by boxctl or the API) is listed and inspected from its
// sandbox alone.

// ctrConfig is a container's create request as boxd resolved it.
type ctrConfig struct {
	Name        string
	Created     time.Time
	Image       string
	Args        []string // the main command: entrypoint and cmd
	Entrypoint  []string
	Cmd         []string
	Env         []string
	WorkingDir  string
	User        string
	Labels      map[string]string
	Tty         bool
	OpenStdin   bool
	Hostname    string
	StopSignal  string
	StopTimeout *int
	Host        hostConfig
	TTL         string
	Network     string // boxd's mode the NetworkMode mapped to
}

// hostConfig is the part of Docker's HostConfig boxd honours.
type hostConfig struct {
	Memory         int64
	NanoCpus       int64
	CpuQuota       int64
	CpuPeriod      int64
	PidsLimit      *int64
	AutoRemove     bool
	ReadonlyRootfs bool
	NetworkMode    string
	StorageOpt     map[string]string
	Runtime        string
	RestartPolicy  struct{ Name string }
	Binds          []string
	Mounts         []mountSpec
	PortBindings   map[string][]portBinding
}

// ctrState is the main command's last run.
type ctrState struct {
	Status     string // created, running, exited
	ProcID     string // boxd's process id (p1, ...)
	Pid        int
	ExitCode   int
	OOMKilled  bool
	Error      string
	StartedAt  time.Time
	FinishedAt time.Time
	Owner      uint32
}

// ctr is a container's in-memory view; mu guards st and the channels.
type ctr struct {
	id  string
	dir string
	cfg ctrConfig

	mu      sync.Mutex
	st      ctrState
	exited  chan struct{} // closed when the current or next run ends
	started chan struct{} // closed when the next run starts
	removed chan struct{} // closed when the container is removed
	gone    bool          // removed, or being removed: follow leaves it be
	rmOnce  sync.Once
}

type containers struct {
	mu       sync.Mutex
	by       map[string]*ctr
	resuming bool // sweep is loading the containers a restarted boxd follows again
}

func (c *containers) init() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.by == nil {
		c.by = map[string]*ctr{}
	}
}

var idRe = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$`)

func (s *Server) ctrDir(id string) string { return filepath.Join(s.StateDir, id) }

// lookup returns the Docker side of sandbox id, nil if it has none.
func (c *containers) lookup(s *Server, id string) *ctr {
	if !idRe.MatchString(id) {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if x, ok := c.by[id]; ok {
		return x
	}
	dir := s.ctrDir(id)
	x := &ctr{id: id, dir: dir, exited: make(chan struct{}), started: make(chan struct{}), removed: make(chan struct{})}
	if readJSON(filepath.Join(dir, "config.json"), &x.cfg) != nil || readJSON(filepath.Join(dir, "state.json"), &x.st) != nil {
		return nil
	}
	if x.st.Status == "running" && !c.resuming {
		// Not followed again at start (resume): its end is unknown.
		x.st.Status, x.st.ExitCode, x.st.Error = "exited", 255, "boxd restarted while the container ran"
	}
	c.by[id] = x
	return x
}

func (c *containers) add(x *ctr) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.by[x.id] = x
}

func (c *containers) drop(s *Server, x *ctr) {
	c.mu.Lock()
	delete(c.by, x.id)
	c.mu.Unlock()
	x.mu.Lock()
	x.gone = true
	x.mu.Unlock()
	_ = os.RemoveAll(x.dir)
	x.rmOnce.Do(func() { close(x.removed) })
}

// status is Docker's status of a sandbox: its container's, else its own.
func (c *containers) status(s *Server, sb *runtime.Sandbox) string {
	if x := c.lookup(s, sb.ID); x != nil {
		x.mu.Lock()
		defer x.mu.Unlock()
		return x.st.Status
	}
	if sb.State == "running" {
		return "running"
	}
	return "exited"
}

// save writes the state (the caller holds x.mu).
func (x *ctr) save() error {
	return writeJSON0(filepath.Join(x.dir, "state.json"), x.st)
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// writeJSON0 writes v to path atomically.
func writeJSON0(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return os.Rename(tmp, path)
}

// sweep removes what boxd kept of containers whose sandbox is gone
// (expired, or deleted with boxctl) while the endpoint was not serving.
func (s *Server) sweep(ctx context.Context) {
	ents, err := os.ReadDir(s.StateDir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !e.IsDir() || !idRe.MatchString(e.Name()) {
			continue
		}
		// No caller in ctx: boxd's own look, which reaches every sandbox.
		sb, err := s.Manager.Get(ctx, e.Name())
		if errdefs.IsNotFound(err) {
			_ = os.RemoveAll(filepath.Join(s.StateDir, e.Name()))
			continue
		}
		if err == nil {
			s.resume(ctx, sb)
		}
	}
}

// resume follows again the main command of a container that ran when boxd
// stopped: the init kept it running (and its output) meanwhile. The log
// gets what it lacks of the init's replay; what it holds is skipped.
func (s *Server) resume(ctx context.Context, sb *runtime.Sandbox) {
	s.ctrs.mu.Lock()
	s.ctrs.resuming = true
	s.ctrs.mu.Unlock()
	x := s.ctrs.lookup(s, sb.ID)
	s.ctrs.mu.Lock()
	s.ctrs.resuming = false
	s.ctrs.mu.Unlock()
	if x == nil || x.st.Status != "running" {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	known := false
	if sb.State == "running" {
		if procs, err := s.Manager.ListProcesses(ctx, sb.ID); err == nil {
			for _, p := range procs {
				known = known || p.ID == x.st.ProcID
			}
		}
	}
	if !known {
		x.st.Status, x.st.ExitCode, x.st.Error = "exited", 255, "boxd restarted while the container ran, and its main command is gone"
		x.st.FinishedAt = time.Now().UTC()
		_ = x.save()
		return
	}
	owner := runtime.WithCaller(context.WithoutCancel(ctx), runtime.Caller{UID: x.st.Owner})
	go s.follow(owner, x, x.st.ProcID, x.exited, loggedSince(x.logPath(), x.st.StartedAt))
}

// loggedSince counts, per stream, the bytes of the log written at or after t.
func loggedSince(path string, t time.Time) [3]int64 {
	var n [3]int64
	f, err := os.Open(path)
	if err != nil {
		return n
	}
	defer f.Close()
	_, _ = readRecords(bufio.NewReaderSize(f, recHeader+maxRecord), func(r record) error {
		if !r.t.Before(t) && int(r.stream) < len(n) {
			n[r.stream] += int64(len(r.data))
		}
		return nil
	})
	return n
}
