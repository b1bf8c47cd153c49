package registry

import (
	"sync"
	"time"

	"github.com/containerd/containerd/v2/core/images"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Blob is how far one blob of a pull or push has come.
type Blob struct {
	Digest string
	// Kind is index, manifest, config or layer.
	Kind string
	Size int64
	Done int64
	// Status is waiting, downloading, exists (already stored), done,
	// uploading, or pushed.
	Status string
}

// Progress is one report: the phase (resolving, downloading, unpacking,
// uploading) and every blob seen so far, in the order first seen.
type Progress struct {
	Phase string
	Blobs []Blob
}

// Reporter receives progress; it is called from one goroutine at a time,
// at most every reportEvery, and once more at the end.
type Reporter func(Progress)

const reportEvery = 100 * time.Millisecond

type tracker struct {
	mu     sync.Mutex
	phase  string
	order  []string
	blobs  map[string]*Blob
	dirty  bool
	report Reporter
	stop   chan struct{}
	done   chan struct{}
}

func newTracker(report Reporter) *tracker {
	t := &tracker{blobs: map[string]*Blob{}, report: report, stop: make(chan struct{}), done: make(chan struct{})}
	if report == nil {
		close(t.done)
		return t
	}
	go t.loop()
	return t
}

func (t *tracker) loop() {
	defer close(t.done)
	tick := time.NewTicker(reportEvery)
	defer tick.Stop()
	for {
		select {
		case <-t.stop:
			t.flush()
			return
		case <-tick.C:
			t.flush()
		}
	}
}

func (t *tracker) flush() {
	t.mu.Lock()
	if !t.dirty {
		t.mu.Unlock()
		return
	}
	p := Progress{Phase: t.phase, Blobs: make([]Blob, 0, len(t.order))}
	for _, d := range t.order {
		p.Blobs = append(p.Blobs, *t.blobs[d])
	}
	t.dirty = false
	t.mu.Unlock()
	t.report(p)
}

// close sends the last report and stops.
func (t *tracker) close() {
	select {
	case <-t.stop:
	default:
		close(t.stop)
	}
	<-t.done
}

func (t *tracker) setPhase(p string) {
	t.mu.Lock()
	t.phase, t.dirty = p, true
	t.mu.Unlock()
}

func kindOf(desc ocispec.Descriptor) string {
	switch {
	case images.IsIndexType(desc.MediaType):
		return "index"
	case images.IsManifestType(desc.MediaType):
		return "manifest"
	case images.IsConfigType(desc.MediaType):
		return "config"
	case images.IsLayerType(desc.MediaType):
		return "layer"
	}
	return "blob"
}

func (t *tracker) set(desc ocispec.Descriptor, status string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	d := desc.Digest.String()
	b, ok := t.blobs[d]
	if !ok {
		b = &Blob{Digest: d, Kind: kindOf(desc), Size: desc.Size}
		t.blobs[d] = b
		t.order = append(t.order, d)
	}
	b.Status = status
	if status == "done" || status == "exists" || status == "pushed" {
		b.Done = b.Size
	}
	t.dirty = true
}

// status returns a blob's status ("" if not seen).
func (t *tracker) status(desc ocispec.Descriptor) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if b, ok := t.blobs[desc.Digest.String()]; ok {
		return b.Status
	}
	return ""
}

func (t *tracker) add(desc ocispec.Descriptor, n int64) {
	t.mu.Lock()
	if b, ok := t.blobs[desc.Digest.String()]; ok {
		b.Done += n
		t.dirty = true
	}
	t.mu.Unlock()
}
