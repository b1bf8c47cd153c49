package gvisor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	toml "github.com/pelletier/go-toml/v2"
)

// TestPinnedMatchesSetup keeps boxd's default --runsc and setup.sh's build
// in step.
func TestPinnedMatchesSetup(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "scripts", "lib.sh"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^GVISOR_VERSION=(\S+)$`).FindSubmatch(b)
	if m == nil || string(m[1]) != Pinned {
		t.Errorf("scripts/lib.sh pins GVISOR_VERSION=%s, package gvisor %s", m, Pinned)
	}
}

// TestProbeMissing: a runsc, or a shim next to it, that is not there is
// ErrNotInstalled, naming the path.
func TestProbeMissing(t *testing.T) {
	dir := t.TempDir()
	if _, err := Probe(context.Background(), filepath.Join(dir, "runsc")); !errors.Is(err, ErrNotInstalled) {
		t.Errorf("missing runsc: %v, want ErrNotInstalled", err)
	}
	runsc := filepath.Join(dir, "runsc")
	if err := os.WriteFile(runsc, []byte("#!/bin/sh\necho 'runsc version x'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := Probe(context.Background(), runsc)
	if !errors.Is(err, ErrNotInstalled) || !regexp.MustCompile(ShimName).MatchString(err.Error()) {
		t.Errorf("missing shim: %v, want ErrNotInstalled naming %s", err, ShimName)
	}
	if err := os.WriteFile(filepath.Join(dir, ShimName), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	info, err := Probe(context.Background(), runsc)
	if err != nil || info.Version != "x" || info.Shim != filepath.Join(dir, ShimName) {
		t.Errorf("Probe = %+v, %v; want version x and the shim next to runsc", info, err)
	}
}

// TestWriteConfig: the shim's options file is TOML the shim decodes into
// its Options (the same keys), with boxd's runsc, root and flags.
func TestWriteConfig(t *testing.T) {
	dir := t.TempDir()
	info := Info{Runsc: "/opt/x/runsc", Shim: "/opt/x/" + ShimName, Version: "v1"}
	path, err := WriteConfig(dir, info, "/var/lib/boxd/gvisor/root", "/var/lib/boxd/sandboxes")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		BinaryName  string            `toml:"binary_name"`
		Root        string            `toml:"root"`
		RunscConfig map[string]string `toml:"runsc_config"`
	}
	if err := toml.Unmarshal(b, &got); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, b)
	}
	// The wrapper (WriteWrapper), which runs info.Runsc.
	if w, _ := os.ReadFile(got.BinaryName); got.BinaryName != filepath.Join(dir, "runsc") || !strings.Contains(string(w), "exec '"+info.Runsc+"' \"$@\"") || got.Root != "/var/lib/boxd/gvisor/root" {
		t.Errorf("binary_name %q root %q", got.BinaryName, got.Root)
	}
	want := Flags()
	if len(got.RunscConfig) != len(want) {
		t.Errorf("runsc_config %v, want %v", got.RunscConfig, want)
	}
	for k, v := range want {
		if got.RunscConfig[k] != v {
			t.Errorf("runsc_config[%s] = %q, want %q", k, got.RunscConfig[k], v)
		}
	}
	if got.RunscConfig["platform"] != "systrap" || got.RunscConfig["network"] != "none" {
		t.Errorf("runsc_config %v: want platform systrap and network none", got.RunscConfig)
	}
	// The sandbox may bind host sockets (the agent's), never connect to
	// one: "open" and "all" would let it reach host daemons' sockets.
	if got.RunscConfig["oci-seccomp"] != "true" {
		t.Errorf("runsc_config %v: want oci-seccomp (the spec's profile applied in the Sentry)", got.RunscConfig)
	}
	if got.RunscConfig["host-uds"] != "create" {
		t.Errorf("runsc_config %v: want host-uds create (not open, not all)", got.RunscConfig)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("%s mode %v, want 0600", path, st.Mode())
	}
	opts := Options(path)
	if opts.TypeUrl != OptionsType || opts.ConfigPath != path {
		t.Errorf("Options = %+v", opts)
	}
}

// Egress sandboxes' options file differs from the others' only in
// runsc's network: its own stack in the sandbox's namespace.
func TestWriteEgressConfig(t *testing.T) {
	dir := t.TempDir()
	info := Info{Runsc: "/x/runsc", Shim: "/x/containerd-shim-runsc-v1"}
	plain, err := WriteConfig(dir, info, "/x/root", "/x/sandboxes")
	if err != nil {
		t.Fatal(err)
	}
	egress, err := WriteEgressConfig(dir, info, "/x/root", "/x/sandboxes")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(plain)
	b, _ := os.ReadFile(egress)
	if plain == egress || !strings.Contains(string(a), `"network" = "none"`) ||
		strings.Replace(string(a), `"network" = "none"`, `"network" = "sandbox"`, 1) != string(b) {
		t.Errorf("options files:\n%s\n%s", a, b)
	}
}
