//go:build linux

package e2e

// The chaos harness's workload: clients that create (from the pool and
// cold), exec with streams, upload files, fork, pause and resume, cancel a
// stream mid-way and delete, and the ledger of what boxd acknowledged.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// sbRec is what the harness knows of one sandbox from boxd's answers.
type sbRec struct {
	id, name string
	// files: path to content of every upload boxd acknowledged.
	files map[string]string
	// deleted: a delete returned success; deleteTried: one returned an
	// error, so the sandbox may be there or not.
	deleted, deleteTried bool
}

type ledger struct {
	mu   sync.Mutex
	byID map[string]*sbRec
	// failedNames: creates that returned an error; such a sandbox may
	// exist (the fault came after it was made) and is checked if it does.
	failedNames map[string]bool
	// acked mutating calls, for the events and audit checks.
	createdIDs, deletedIDs []string
}

func newLedger() *ledger {
	return &ledger{byID: map[string]*sbRec{}, failedNames: map[string]bool{}}
}

func (l *ledger) created(id, name string, files map[string]string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	cp := map[string]string{}
	for k, v := range files {
		cp[k] = v
	}
	l.byID[id] = &sbRec{id: id, name: name, files: cp}
	l.createdIDs = append(l.createdIDs, id)
}

// pick returns a random live sandbox (acknowledged, no delete tried).
func (l *ledger) pick(intn func(int) int) *sbRec {
	l.mu.Lock()
	defer l.mu.Unlock()
	var live []string
	for id, r := range l.byID {
		if !r.deleted && !r.deleteTried {
			live = append(live, id)
		}
	}
	if len(live) == 0 {
		return nil
	}
	sort.Strings(live)
	return l.byID[live[intn(len(live))]]
}

func (l *ledger) live() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.byID {
		if !r.deleted {
			n++
		}
	}
	return n
}

func (l *ledger) filesOf(id string) map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	cp := map[string]string{}
	if r := l.byID[id]; r != nil {
		for k, v := range r.files {
			cp[k] = v
		}
	}
	return cp
}

func (l *ledger) update(id string, f func(r *sbRec)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r := l.byID[id]; r != nil {
		f(r)
	}
}

// workload runs the clients; pause and run gate them between faults.
type workload struct {
	c      *chaosEnv
	gate   sync.RWMutex
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	seq    atomic.Int64
}

// startWorkload starts n clients, paused.
func (c *chaosEnv) startWorkload(n int) *workload {
	w := &workload{c: c}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	w.gate.Lock()
	for i := 0; i < n; i++ {
		w.wg.Add(1)
		go w.client()
	}
	return w
}

// run lets the clients work for d; they go on until pause.
func (w *workload) run(d time.Duration) {
	w.gate.Unlock()
	time.Sleep(d)
}

// pause waits for every call in flight to end (each is bounded) and holds
// the clients.
func (w *workload) pause() { w.gate.Lock() }

func (w *workload) stop() {
	w.cancel()
	w.gate.Unlock()
	w.wg.Wait()
}

func (w *workload) client() {
	defer w.wg.Done()
	for w.ctx.Err() == nil {
		w.gate.RLock()
		if w.ctx.Err() == nil {
			w.one()
		}
		w.gate.RUnlock()
		time.Sleep(time.Duration(w.c.intn(50)) * time.Millisecond)
	}
}

// one makes one call of a random kind.
func (w *workload) one() {
	c := w.c
	switch k := c.intn(100); {
	case k < 22 && c.led.live() < 10:
		w.create(k < 11)
	case k < 45:
		w.execStream()
	case k < 62:
		w.upload()
	case k < 70 && c.led.live() < 10:
		w.fork()
	case k < 78:
		w.pauseResume()
	case k < 84:
		w.cancelMidStream()
	default:
		if c.led.live() > 3 {
			w.delete()
		} else {
			w.execStream()
		}
	}
}

// call runs f under the call bound and counts it as op.
func (w *workload) call(op string, f func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(w.ctx, chaosCallBound)
	defer cancel()
	start := time.Now()
	err := f(ctx)
	w.c.stats.call(op, err, time.Since(start), w.ctx.Err() != nil)
	return err
}

func (w *workload) create(cold bool) {
	name := fmt.Sprintf("chaos-%d", w.seq.Add(1))
	op := "create (pool)"
	if cold {
		op = "create (cold)"
	}
	var id string
	err := w.call(op, func(ctx context.Context) error {
		r, err := w.c.api.CreateSandbox(ctx, connect.NewRequest(&boxdv1.CreateSandboxRequest{Name: name, Cold: cold}))
		if err == nil {
			id = r.Msg.Sandbox.Id
		}
		return err
	})
	if err != nil {
		w.c.led.mu.Lock()
		w.c.led.failedNames[name] = true
		w.c.led.mu.Unlock()
		return
	}
	w.c.led.created(id, name, nil)
	w.uploadTo(id)
}

func (w *workload) upload() {
	if r := w.c.led.pick(w.c.intn); r != nil {
		w.uploadTo(r.id)
	}
}

// uploadTo writes a file of its own into the sandbox; once boxd says it
// is written, it must stay (until the sandbox is deleted).
func (w *workload) uploadTo(id string) {
	n := w.seq.Add(1)
	path, content := fmt.Sprintf("/workspace/up-%d", n), fmt.Sprintf("%s %d %s\n", id, n, strings.Repeat("x", w.c.intn(4096)))
	err := w.call("upload", func(ctx context.Context) error {
		s := w.c.files.WriteFile(ctx)
		if err := s.Send(&boxdv1.WriteFileRequest{SandboxId: id, Path: path, Data: []byte(content)}); err != nil {
			_, cerr := s.CloseAndReceive()
			return errors.Join(err, cerr)
		}
		_, err := s.CloseAndReceive()
		return err
	})
	if err == nil {
		w.c.led.update(id, func(r *sbRec) { r.files[path] = content })
	}
}

// execStream runs a command that reads the sandbox's files and streams its
// output back.
func (w *workload) execStream() {
	r := w.c.led.pick(w.c.intn)
	if r == nil {
		return
	}
	_ = w.call("exec stream", func(ctx context.Context) error {
		_, err := execStreamOut(ctx, w.c, r.id, "cat /workspace/up-* | wc -c; echo done")
		return err
	})
}

// execStreamOut runs script with ExecStream and returns its stdout; a
// non-zero exit is an error.
func execStreamOut(ctx context.Context, c *chaosEnv, id, script string) (string, error) {
	s, err := c.api.ExecStream(ctx, connect.NewRequest(&boxdv1.ExecRequest{SandboxId: id, Args: []string{"sh", "-c", script}}))
	if err != nil {
		return "", err
	}
	defer s.Close()
	var out strings.Builder
	for s.Receive() {
		m := s.Msg()
		out.Write(m.GetStdout())
		if res := m.GetResult(); res != nil {
			if res.ExitCode != 0 {
				return out.String(), fmt.Errorf("exit %d", res.ExitCode)
			}
			return out.String(), nil
		}
	}
	if err := s.Err(); err != nil {
		return out.String(), err
	}
	return out.String(), errors.New("stream ended without a result")
}

func (w *workload) fork() {
	src := w.c.led.pick(w.c.intn)
	if src == nil {
		return
	}
	files := w.c.led.filesOf(src.id) // acknowledged before the fork began
	name := fmt.Sprintf("chaos-%d", w.seq.Add(1))
	var ids []string
	err := w.call("fork", func(ctx context.Context) error {
		r, err := w.c.api.ForkSandbox(ctx, connect.NewRequest(&boxdv1.ForkSandboxRequest{SandboxId: src.id, Names: []string{name}}))
		if err == nil {
			for _, sb := range r.Msg.Sandboxes {
				ids = append(ids, sb.Id)
			}
		}
		return err
	})
	if err != nil {
		w.c.led.mu.Lock()
		w.c.led.failedNames[name] = true
		w.c.led.mu.Unlock()
		return
	}
	for _, id := range ids {
		w.c.led.created(id, name, files)
	}
}

func (w *workload) pauseResume() {
	r := w.c.led.pick(w.c.intn)
	if r == nil {
		return
	}
	if err := w.call("pause", func(ctx context.Context) error {
		_, err := w.c.api.PauseSandbox(ctx, connect.NewRequest(&boxdv1.PauseSandboxRequest{Id: r.id}))
		return err
	}); err != nil {
		return
	}
	time.Sleep(time.Duration(w.c.intn(300)) * time.Millisecond)
	_ = w.call("resume", func(ctx context.Context) error {
		_, err := w.c.api.UnpauseSandbox(ctx, connect.NewRequest(&boxdv1.UnpauseSandboxRequest{Id: r.id}))
		return err
	})
}

// cancelMidStream starts a command that streams for ever and goes away
// after its first output, as a client that dies or gives up.
func (w *workload) cancelMidStream() {
	r := w.c.led.pick(w.c.intn)
	if r == nil {
		return
	}
	_ = w.call("cancelled stream", func(ctx context.Context) error {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		s, err := w.c.api.ExecStream(ctx, connect.NewRequest(&boxdv1.ExecRequest{SandboxId: r.id, Args: []string{"yes"}}))
		if err != nil {
			return err
		}
		defer s.Close()
		for s.Receive() {
			if len(s.Msg().GetStdout()) > 0 {
				cancel()
				return nil
			}
		}
		return s.Err()
	})
}

func (w *workload) delete() {
	r := w.c.led.pick(w.c.intn)
	if r == nil {
		return
	}
	err := w.call("delete", func(ctx context.Context) error {
		_, err := w.c.api.DeleteSandbox(ctx, connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: r.id, Force: true}))
		return err
	})
	w.c.led.mu.Lock()
	defer w.c.led.mu.Unlock()
	if err == nil {
		r.deleted = true
		w.c.led.deletedIDs = append(w.c.led.deletedIDs, r.id)
	} else {
		r.deleteTried = true
	}
}
