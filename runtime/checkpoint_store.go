//go:build linux

// Room: checkpoint. Where a checkpoint lives and how boxd knows it is
// the one it wrote: the images in the sandbox's host-root-only directory,
// every file's HMAC under boxd's key in a manifest (itself HMAC'd), and
// the daemon total of checkpoint bytes.

package runtime

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/containerd/errdefs"

	"github.com/boxd-dev/boxd/internal/gvisor"
)

// DefaultMaxCheckpointBytes is --max-checkpoint-bytes' default: the total
// of all checkpoints on disk.
const DefaultMaxCheckpointBytes = 16 << 30

// ckSlack is what a checkpoint may need beyond the sandbox's memory limit
// and disk cap: the kernel state runsc writes beside the memory pages.
const ckSlack = 64 << 20

// checkpoints is the checkpoint room's state in the Manager.
type checkpoints struct {
	mu       sync.Mutex
	reserved int64  // bytes promised to checkpoints being written
	key      []byte // boxd's HMAC key (ckKey), loaded on first use
}

// ckDir is sandbox id's checkpoint directory: inside its state directory,
// which only host root can enter and which is never mounted into the
// sandbox, so it goes with the sandbox; ckImageDir is where runsc writes.
func (m *Manager) ckDir(id string) string      { return filepath.Join(m.sandboxDir(id), "checkpoint") }
func (m *Manager) ckImageDir(id string) string { return filepath.Join(m.ckDir(id), gvisor.ImageName) }

// ckManifest is what boxd records of a checkpoint. Written and read only by
// boxd; the image files themselves are never parsed by boxd, only hashed.
type ckManifest struct {
	Sandbox string    `json:"sandbox"`
	Created time.Time `json:"created"`
	// Secret is what the init proves it holds after the restore
	// (wire.OpCheckpointResume).
	Secret []byte   `json:"secret"`
	Files  []ckFile `json:"files"`
	Bytes  int64    `json:"bytes"`
	Pause  string   `json:"pause"` // how long the sandbox was stopped to be saved
}

type ckFile struct {
	Name string `json:"name"`
	Size int64  `json:"size"`
	MAC  []byte `json:"mac"`
}

// ckKey is boxd's checkpoint key: 32 random bytes in the state directory,
// host root's and 0600, made on first use and kept across restarts.
func (m *Manager) ckKey() ([]byte, error) {
	m.ckpt.mu.Lock()
	defer m.ckpt.mu.Unlock()
	if m.ckpt.key != nil {
		return m.ckpt.key, nil
	}
	path := filepath.Join(m.cfg.StateDir, "checkpoint.key")
	key, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		key = make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, fmt.Errorf("checkpoint key: %w", err)
		}
		_, err = f.Write(key)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(path)
			return nil, fmt.Errorf("checkpoint key: %w", err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("checkpoint key: %w", err)
	}
	if len(key) != 32 {
		return nil, fmt.Errorf("checkpoint key %s: %d bytes, want 32", path, len(key))
	}
	m.ckpt.key = key
	return key, nil
}

// ckFileMAC is the HMAC of one image file, bound to its sandbox and name
// so that no file can stand in for another's.
func ckFileMAC(key []byte, id, name string, r io.Reader) ([]byte, int64, error) {
	h := hmac.New(sha256.New, key)
	fmt.Fprintf(h, "boxd checkpoint file\x00%s\x00%s\x00", id, name)
	n, err := io.Copy(h, r)
	return h.Sum(nil), n, err
}

func ckManifestMAC(key, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte("boxd checkpoint manifest\x00"))
	h.Write(body)
	return h.Sum(nil)
}

// ckSeal hashes every file runsc wrote and records them with man in the
// manifest and its MAC.
func (m *Manager) ckSeal(id string, man *ckManifest) error {
	key, err := m.ckKey()
	if err != nil {
		return err
	}
	ents, err := os.ReadDir(m.ckImageDir(id))
	if err != nil {
		return fmt.Errorf("checkpoint image: %w", err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			return fmt.Errorf("checkpoint image: %s is not a regular file", e.Name())
		}
		mac, n, err := ckHashFile(key, id, filepath.Join(m.ckImageDir(id), e.Name()), e.Name())
		if err != nil {
			return err
		}
		man.Files = append(man.Files, ckFile{Name: e.Name(), Size: n, MAC: mac})
		man.Bytes += n
	}
	body, err := json.Marshal(man)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(m.ckDir(id), "manifest.json"), body, 0o600); err != nil {
		return fmt.Errorf("checkpoint manifest: %w", err)
	}
	return os.WriteFile(filepath.Join(m.ckDir(id), "manifest.mac"), ckManifestMAC(key, body), 0o600)
}

func ckHashFile(key []byte, id, path, name string) ([]byte, int64, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("checkpoint image: %w", err)
	}
	defer f.Close()
	return ckFileMAC(key, id, name, f)
}

// ckVerify checks sandbox id's checkpoint before runsc may read it: the
// manifest's MAC, and every file in the image directory is one the
// manifest lists, of its size and MAC, and none is missing. Any
// difference is a checkpoint boxd did not write, refused.
func (m *Manager) ckVerify(id string) (*ckManifest, error) {
	key, err := m.ckKey()
	if err != nil {
		return nil, err
	}
	body, err := os.ReadFile(filepath.Join(m.ckDir(id), "manifest.json"))
	if err != nil {
		return nil, ckTampered(id, "manifest: %v", err)
	}
	mac, err := os.ReadFile(filepath.Join(m.ckDir(id), "manifest.mac"))
	if err != nil || !hmac.Equal(mac, ckManifestMAC(key, body)) {
		return nil, ckTampered(id, "the manifest's MAC does not match")
	}
	var man ckManifest
	if err := json.Unmarshal(body, &man); err != nil || man.Sandbox != id {
		return nil, ckTampered(id, "the manifest is not this sandbox's")
	}
	ents, err := os.ReadDir(m.ckImageDir(id))
	if err != nil {
		return nil, ckTampered(id, "image: %v", err)
	}
	if len(ents) != len(man.Files) {
		return nil, ckTampered(id, "the image has %d files, the manifest %d", len(ents), len(man.Files))
	}
	sort.Slice(man.Files, func(i, j int) bool { return man.Files[i].Name < man.Files[j].Name })
	for i, e := range ents { // ReadDir sorts by name
		want := man.Files[i]
		if e.Name() != want.Name || !e.Type().IsRegular() {
			return nil, ckTampered(id, "%s is not a file the manifest lists", e.Name())
		}
		got, n, err := ckHashFile(key, id, filepath.Join(m.ckImageDir(id), e.Name()), e.Name())
		if err != nil {
			return nil, ckTampered(id, "%s: %v", e.Name(), err)
		}
		if n != want.Size || !hmac.Equal(got, want.MAC) {
			return nil, ckTampered(id, "%s was changed on disk", e.Name())
		}
	}
	return &man, nil
}

func ckTampered(id, format string, args ...any) error {
	return fmt.Errorf("checkpoint of sandbox %s fails its integrity check (%s): refusing to restore it; delete the sandbox: %w",
		id, fmt.Sprintf(format, args...), errdefs.ErrFailedPrecondition)
}

// ckUsed is the total size of the checkpoints on disk, from the files
// themselves (so it holds across restarts of boxd).
func (m *Manager) ckUsed() int64 {
	dirs, _ := filepath.Glob(filepath.Join(m.cfg.StateDir, "sandboxes", "*", "checkpoint", "image"))
	var n int64
	for _, d := range dirs {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			if fi, err := e.Info(); err == nil {
				n += fi.Size()
			}
		}
	}
	return n
}

// ckReserve promises need bytes to a checkpoint about to be written, if
// the total stays within --max-checkpoint-bytes; the returned func gives
// the promise back (the files then count by themselves).
func (m *Manager) ckReserve(need int64) (func(), error) {
	m.ckpt.mu.Lock()
	defer m.ckpt.mu.Unlock()
	limit := m.cfg.MaxCheckpointBytes
	used := m.ckUsed() + m.ckpt.reserved
	if used+need > limit {
		return nil, fmt.Errorf("checkpoint: it may take %s (memory limit + disk cap + %s), and %s of the daemon's %s (--max-checkpoint-bytes) are in use: %w",
			fmtBytes(need), fmtBytes(ckSlack), fmtBytes(used), fmtBytes(limit), errdefs.ErrResourceExhausted)
	}
	m.ckpt.reserved += need
	return func() {
		m.ckpt.mu.Lock()
		m.ckpt.reserved -= need
		m.ckpt.mu.Unlock()
	}, nil
}

func fmtBytes(n int64) string { return strconv.FormatInt(n>>20, 10) + " MiB" }
