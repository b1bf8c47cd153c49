//go:build linux

package runtime

import (
	"context"
	"strings"
	"testing"

	"github.com/containerd/errdefs"

	"github.com/boxd-dev/boxd/internal/volume"
)

func TestParseVolumeSpec(t *testing.T) {
	for _, tc := range []struct {
		in   string
		ok   bool
		name string
		path string
		ro   bool
	}{
		{"data:/data", true, "data", "/data", false},
		{"data:/data:ro", true, "data", "/data", true},
		{"data:/a/b:rw", true, "data", "/a/b", false},
		{"../x:/data", false, "", "", false},
		{"a/b:/data", false, "", "", false},
		{"a..b:/data", false, "", "", false},
		{"data", false, "", "", false},
		{"data:rel", false, "", "", false},
		{"data:/", false, "", "", false},
		{"data:/a/../b", false, "", "", false},
		{"data:/proc", false, "", "", false},
		{"data:/dev/x", false, "", "", false},
		{"data:/.boxd/run", false, "", "", false},
		{"data:/data:rx", false, "", "", false},
		{"data:/data:ro:x", false, "", "", false},
	} {
		name, p, ro, err := parseVolumeSpec("volumes[0]", tc.in)
		if (err == nil) != tc.ok || name != tc.name || p != tc.path || ro != tc.ro {
			t.Errorf("%q: %q %q %v %v", tc.in, name, p, ro, err)
		}
		if err != nil && (!errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), "volumes[0]")) {
			t.Errorf("%q: error %v must be invalid_argument naming volumes[0]", tc.in, err)
		}
	}
}

// volumesManager is a Manager with volumes a (uid 1000), b (uid 1001)
// and s (uid 1000, shared), and no host side.
func volumesManager(t *testing.T) *Manager {
	m := &Manager{vols: newVolumes(t.TempDir())}
	for _, meta := range []volume.Meta{
		{ID: "ida", Name: "a", Owner: 1000}, {ID: "idb", Name: "b", Owner: 1001}, {ID: "ids", Name: "s", Owner: 1000, Shared: true},
	} {
		m.vols.byID[meta.ID] = meta
	}
	return m
}

func TestAttachVolumes(t *testing.T) {
	m := volumesManager(t)
	user := WithCaller(context.Background(), Caller{UID: 1000})
	r := resolved{runtime: RuntimeRunc}
	if _, err := m.attachVolumes(user, "t1", r, []string{"a:/data"}); err != nil {
		t.Fatal(err)
	}
	m.settleVolumes("t1", "sb1")
	if _, err := m.attachVolumes(user, "t2", r, []string{"a:/data:ro", "s:/s"}); err != nil {
		t.Errorf("read-only beside a writer: %v", err)
	}
	// A second writer is refused naming the first; the volume asked for
	// before it is not left held.
	_, err := m.attachVolumes(user, "t3", r, []string{"s:/s", "a:/data"})
	if !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "sb1") || !strings.Contains(err.Error(), `"a"`) {
		t.Errorf("second writer: %v", err)
	}
	for _, hs := range m.vols.users {
		if _, ok := hs["t3"]; ok {
			t.Error("a refused create holds a volume")
		}
	}
	if _, err := m.attachVolumes(user, "t4", r, []string{"s:/s"}); err != nil {
		t.Errorf("second writer of a shared volume: %v", err)
	}
	// Another user's volume is a missing one.
	_, other := m.attachVolumes(user, "t5", r, []string{"b:/b"})
	_, missing := m.attachVolumes(user, "t5", r, []string{"nosuch:/b"})
	if !errdefs.IsNotFound(other) || strings.ReplaceAll(other.Error(), `"b"`, "X") != strings.ReplaceAll(missing.Error(), `"nosuch"`, "X") {
		t.Errorf("other's volume %v, missing %v", other, missing)
	}
	if _, err := m.attachVolumes(user, "t6", resolved{runtime: RuntimeGvisor}, []string{"s:/s"}); !errdefs.IsFailedPrecondition(err) {
		t.Errorf("gvisor: %v", err)
	}
	m.releaseVolumes("sb1")
	if _, err := m.attachVolumes(user, "t7", r, []string{"a:/data"}); err != nil {
		t.Errorf("writer after the first is gone: %v", err)
	}
	// The admin reaches every owner's volume.
	admin := WithCaller(context.Background(), Caller{UID: 0, Admin: true})
	if _, err := m.attachVolumes(admin, "t8", r, []string{"b:/b:ro"}); err != nil {
		t.Errorf("admin: %v", err)
	}
}

func TestVolumeNames(t *testing.T) {
	for _, bad := range []string{"", "..", "../x", "a/b", ".hidden", "a..b", strings.Repeat("x", 64), "a b", "a\x00"} {
		if err := ValidateVolumeName("name", bad); !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), "name") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	for _, good := range []string{"a", "work", "my-vol_1.2", strings.Repeat("x", 63)} {
		if err := ValidateVolumeName("name", good); err != nil {
			t.Errorf("%q: %v", good, err)
		}
	}
	if _, _, err := parseFrom("src@../x"); !errdefs.IsInvalidArgument(err) {
		t.Errorf("from with a bad snapshot: %v", err)
	}
}
