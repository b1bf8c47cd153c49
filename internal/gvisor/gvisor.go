// Package gvisor finds gVisor's runsc and its containerd shim, which
// `create --runtime gvisor` sandboxes run on, and writes the shim's options.
//
// A gVisor sandbox runs its processes on runsc's own kernel (the Sentry, in
// user space, on the systrap platform: seccomp traps, no KVM needed) rather
// than on the host's: the host kernel sees only the Sentry's and the
// gofer's few, seccomp-filtered system calls.
package gvisor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/containerd/containerd/api/types/runtimeoptions/v1"
)

// Name is the runtime's name in requests and inspect.
const Name = "gvisor"

// Pinned is the gVisor module version scripts/setup.sh builds
// (GVISOR_VERSION in scripts/lib.sh; a unit test keeps the two equal).
// gVisor tags no module versions: this is a commit of its Go branch.
const Pinned = "v0.0.0-20260905035102-160fafc42237"

// ShimName is the shim's binary name, expected next to runsc. A client can
// hand containerd its absolute path as the runtime, so that no containerd
// configuration or PATH has to name it.
const ShimName = "containerd-shim-runsc-v1"

// Platform is how the Sentry intercepts system calls: systrap (seccomp
// SIGSYS traps) works on any x86-64 or arm64 kernel, in a VM or not.
const Platform = "systrap"

// OptionsType is the TypeUrl the shim reads its options as.
const OptionsType = "io.containerd.runsc.v1.options"

// PinnedPath is where scripts/setup.sh puts the pinned runsc:
// $BOXD_DEPS/gvisor-<Pinned>/runsc.
func PinnedPath() string {
	deps := os.Getenv("BOXD_DEPS")
	if deps == "" {
		deps = "/opt/boxd-deps"
	}
	return filepath.Join(deps, "gvisor-"+Pinned, "runsc")
}

// Info is a runsc boxd found.
type Info struct {
	Runsc   string // absolute path of runsc
	Shim    string // absolute path of containerd-shim-runsc-v1, next to it
	Version string // what `runsc --version` printed as its version
}

var versionLineRe = regexp.MustCompile(`(?m)^runsc version (\S+)`)

// ErrNotInstalled is returned by Probe when runsc or its shim is missing.
var ErrNotInstalled = errors.New("gVisor is not installed")

// Probe checks that runsc at path and the shim next to it exist, and asks
// runsc for its version (bounded by a few seconds).
func Probe(ctx context.Context, path string) (Info, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return Info{}, fmt.Errorf("runsc %s: %w", path, err)
	}
	shim := filepath.Join(filepath.Dir(abs), ShimName)
	for _, p := range []string{abs, shim} {
		st, err := os.Stat(p)
		if err != nil {
			return Info{}, fmt.Errorf("%w: %v (scripts/setup.sh builds gVisor %s into %s)", ErrNotInstalled, err, Pinned, filepath.Dir(PinnedPath()))
		}
		if st.IsDir() || st.Mode()&0o111 == 0 {
			return Info{}, fmt.Errorf("%w: %s is not an executable file", ErrNotInstalled, p)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var out, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, abs, "--version")
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return Info{}, fmt.Errorf("runsc %s --version: %w: %s", abs, err, strings.TrimSpace(stderr.String()))
	}
	m := versionLineRe.FindStringSubmatch(out.String())
	if m == nil {
		return Info{}, fmt.Errorf("runsc %s --version printed no \"runsc version X\" line", abs)
	}
	return Info{Runsc: abs, Shim: shim, Version: m[1]}, nil
}

// Flags are the runsc flags every gVisor sandbox runs with (the shim's
// runsc_config). Each is the narrowest setting boxd works with:
//   - platform systrap: see Platform.
//   - network none: loopback only, as boxd's sandboxes have by default;
//     runsc then gives the Sentry no host network at all.
//   - host-uds create: the init binds the agent socket in the directory
//     boxd mounts for it, and runsc's gofer makes that a host socket boxd
//     connects to (agent/gvchannel). gVisor cannot serve a host listening
//     socket handed in by SCM_RIGHTS, as the runc sandboxes' init does:
//     the Sentry imports a received host socket as a connected endpoint
//     (pkg/sentry/fsimpl/host newEndpoint, transport.NewExternal), whose
//     accept is EINVAL. "create" lets code in the sandbox bind host sockets
//     in its host-backed mounts; it cannot connect to any host socket
//     ("open" stays off).
//   - oci-seccomp: the Sentry applies the runtime-spec's seccomp profile
//     (containerd's default plus boxd's denials, oci.DeniedSyscalls) to
//     the sandbox's own system calls, as runc's sandboxes have it; runsc
//     ignores the profile by default, relying on its own filter of the
//     Sentry alone.
func Flags() map[string]string {
	return map[string]string{
		"platform":    Platform,
		"network":     "none",
		"host-uds":    "create",
		"oci-seccomp": "true",
	}
}

// WriteConfig writes the shim's options file (TOML) for info under dir and
// returns its path. root is runsc's state root, kept under boxd's state
// (runsc's default is host-global /var/run/runsc). The runsc the shim runs
// is boxd's wrapper of info.Runsc (WriteWrapper), which restores a
// checkpointed sandbox of sandboxes (boxd's per-sandbox state directories)
// when boxd asks for it.
func WriteConfig(dir string, info Info, root, sandboxes string) (string, error) {
	return writeConfig(dir, "runsc.toml", info, root, sandboxes, Flags())
}

// EgressFlags are Flags for a sandbox with boxd's egress network: runsc's
// own network stack (netstack) on the interface of the namespace the
// spec names (network "sandbox"), in place of none. Raw and packet
// sockets stay off in the sandbox (runsc's --net-raw is not given), so
// code in it sends what netstack builds, from the address boxd gave it.
func EgressFlags() map[string]string {
	f := Flags()
	f["network"] = "sandbox"
	return f
}

// WriteEgressConfig writes the options file of egress sandboxes
// (EgressFlags) beside WriteConfig's and returns its path.
func WriteEgressConfig(dir string, info Info, root, sandboxes string) (string, error) {
	return writeConfig(dir, "runsc-egress.toml", info, root, sandboxes, EgressFlags())
}

func writeConfig(dir, name string, info Info, root, sandboxes string, flags map[string]string) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("gvisor: config dir: %w", err)
	}
	wrapper, err := WriteWrapper(dir, info, sandboxes)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, name)
	return path, writeConfigFile(path, wrapper, root, flags)
}

// writeConfigFile writes the shim's options, with binary as runsc, to path.
func writeConfigFile(path, binary, root string, flags map[string]string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Written by boxd: the options of gVisor's containerd shim.\n")
	fmt.Fprintf(&b, "binary_name = %q\nroot = %q\n\n[runsc_config]\n", binary, root)
	for _, k := range []string{"host-uds", "network", "oci-seccomp", "platform"} {
		fmt.Fprintf(&b, "%q = %q\n", k, flags[k])
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("gvisor: write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("gvisor: %w", err)
	}
	return nil
}

// Annotations mark a container as the root container of its own gVisor
// sandbox, as containerd's CRI marks a pod's sandbox. The shim reads them
// outside CRI too: without them it runs `runsc create` with its output
// captured in a pipe that the sandbox and gofer processes runsc starts
// inherit and keep open, so the create never returns (the shim hangs in
// exec.Cmd.Wait); with them it hands runsc the container's own I/O.
func Annotations(id string) map[string]string {
	return map[string]string{
		"io.kubernetes.cri.container-type": "sandbox",
		"io.kubernetes.cri.sandbox-id":     id,
	}
}

// Options is what a client passes to containerd with the shim (its path or
// io.containerd.runsc.v1) as the runtime: the shim reads the TOML file
// ConfigPath names.
func Options(configPath string) *runtimeoptions.Options {
	return &runtimeoptions.Options{TypeUrl: OptionsType, ConfigPath: configPath}
}
