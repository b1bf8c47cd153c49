package oci

import (
	"slices"
	"testing"
)

// The per-sandbox tunables land where runc reads them.
func TestSpecTunables(t *testing.T) {
	c := baseConfig()
	c.User = "agent"
	c.Tmpfs = []Tmpfs{{Path: "/cache", SizeBytes: 8 << 20}}
	c.ShmSizeBytes = 2 << 20
	c.CPUTime = 60
	c.CPUShares = 13085
	c.MemoryLow = 32 << 20
	s := mustSpec(t, c)
	cfg, err := InitConfig(s)
	if err != nil || cfg.User != "agent" {
		t.Fatalf("init config user %q (%v), want agent", cfg.User, err)
	}
	var cache, shm bool
	for _, m := range s.Mounts {
		switch m.Destination {
		case "/cache":
			cache = m.Type == "tmpfs" && slices.Contains(m.Options, "size=8388608") && slices.Contains(m.Options, "nodev") && slices.Contains(m.Options, "nosuid")
		case "/dev/shm":
			shm = slices.Contains(m.Options, "size=2048k")
		}
	}
	if !cache || !shm {
		t.Errorf("mounts: /cache tmpfs %v, /dev/shm 2m %v: %+v", cache, shm, s.Mounts)
	}
	var cpu bool
	for _, r := range s.Process.Rlimits {
		cpu = cpu || (r.Type == "RLIMIT_CPU" && r.Soft == 60 && r.Hard == 60)
	}
	if !cpu {
		t.Errorf("no RLIMIT_CPU of 60: %+v", s.Process.Rlimits)
	}
	res := s.Linux.Resources
	if res.CPU.Shares == nil || *res.CPU.Shares != 13085 || res.Memory.Reservation == nil || *res.Memory.Reservation != 32<<20 {
		t.Errorf("resources: %+v %+v", res.CPU, res.Memory)
	}
	for _, bad := range []func(*Config){
		func(c *Config) { c.Tmpfs = []Tmpfs{{Path: "rel", SizeBytes: 1}} },
		func(c *Config) { c.Tmpfs = []Tmpfs{{Path: "/x", SizeBytes: 0}} },
		func(c *Config) { c.MemoryLow = c.MemoryBytes + 1 },
		func(c *Config) { c.ShmSizeBytes = -1 },
	} {
		c := baseConfig()
		bad(&c)
		if _, err := Spec(testCtx(), c); err == nil {
			t.Errorf("Spec accepted %+v", c)
		}
	}
}
