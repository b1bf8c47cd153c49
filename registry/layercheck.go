package registry

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"sync/atomic"

	"github.com/containerd/containerd/v2/pkg/archive/compression"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
)

// budget is what is left of a pull's --max-image-size, shared by the
// layers of one pull (they download concurrently).
type budget struct {
	left  atomic.Int64
	limit int64
}

func newBudget(limit int64) *budget {
	b := &budget{limit: limit}
	b.left.Store(limit)
	return b
}

// countingReader charges every byte it reads to the budget.
type countingReader struct {
	r io.Reader
	b *budget
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if c.b.limit > 0 && c.b.left.Add(-int64(n)) < 0 {
		return n, fmt.Errorf("the image's layers expand to more than %d bytes (boxd --max-image-size): %w", c.b.limit, errdefs.ErrResourceExhausted)
	}
	return n, err
}

// layerError is a layer refused by checkLayer; explain finds it under
// the wrapping of containerd's copy.
type layerError struct{ err error }

func (e *layerError) Error() string { return e.err.Error() }
func (e *layerError) Unwrap() error { return e.err }

// checkLayer reads a layer blob (gzip, zstd or plain tar) as a hostile
// tar: containerd's applier keeps every entry inside the snapshot by
// resolving names within it, but an entry that tries to leave it
// ("../x", a hard link to "../../etc/shadow") is not a mistake any image
// builder makes, so the image is refused instead of quietly repaired.
// The uncompressed bytes count against b, so a decompression bomb ends
// the pull long before it fills the disk.
func checkLayer(r io.Reader, d digest.Digest, b *budget) error {
	if err := readLayer(r, d, b); err != nil {
		return &layerError{err}
	}
	return nil
}

func readLayer(r io.Reader, d digest.Digest, b *budget) error {
	dr, err := compression.DecompressStream(r)
	if err != nil {
		return fmt.Errorf("layer %s: not a gzip, zstd or tar stream: %v: %w", d, err, errdefs.ErrInvalidArgument)
	}
	defer dr.Close()
	cr := &countingReader{r: dr, b: b}
	tr := tar.NewReader(cr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return layerErr(d, err)
		}
		if bad := escapes(h.Name); bad {
			return fmt.Errorf("layer %s: entry %q leaves the image's root: %w", d, h.Name, errdefs.ErrInvalidArgument)
		}
		if h.Typeflag == tar.TypeLink && escapes(h.Linkname) {
			return fmt.Errorf("layer %s: hard link %q points out of the image's root (%q): %w", d, h.Name, h.Linkname, errdefs.ErrInvalidArgument)
		}
		if _, err := io.Copy(io.Discard, tr); err != nil {
			return layerErr(d, err)
		}
	}
	// Whatever follows the tar's end still has to decompress within budget.
	if _, err := io.Copy(io.Discard, cr); err != nil {
		return layerErr(d, err)
	}
	return nil
}

func layerErr(d digest.Digest, err error) error {
	if errdefs.IsResourceExhausted(err) {
		return fmt.Errorf("layer %s: %w", d, err)
	}
	return fmt.Errorf("layer %s: not a valid tar: %v: %w", d, err, errdefs.ErrInvalidArgument)
}

// escapes reports whether a tar name leaves the root once cleaned, as a
// leading "/" is taken relative to the root.
func escapes(name string) bool {
	rel := path.Clean(strings.TrimLeft(name, "/"))
	return rel == ".." || strings.HasPrefix(rel, "../")
}
