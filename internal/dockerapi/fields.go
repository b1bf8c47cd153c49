//go:build linux

package dockerapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
)

// Default deny: every field a client may send to container create, in its
// HostConfig, or to exec create is in exactly one of three tables. A
// non-zero field in none of them is a 400 naming it, so a field added to
// Docker's API is refused until someone decides what it means on boxd.
// docs/docker.md renders these tables (TestFieldTablesDoc keeps it true).

type table int

const (
	honoured table = iota // boxd does what it asks
	ignored               // accepted and dropped: harmless on boxd
	refused               // a 400 naming it whenever it is not zero
)

var tableNames = [...]string{honoured: "honoured", ignored: "ignored", refused: "refused"}

// fieldRule is one field's table and what the docs say about it; check,
// if set, refuses some values of an honoured field.
type fieldRule struct {
	name  string
	t     table
	note  string
	check func(raw json.RawMessage) string // "" or why the value is refused
}

var createFields = []fieldRule{
	{name: "Image", t: honoured, note: "a boxd image; present images need no pull"},
	{name: "Cmd", t: honoured, note: "the main command's arguments (the image's Cmd if empty)"},
	{name: "Entrypoint", t: honoured, note: "the image's Entrypoint if not given"},
	{name: "Env", t: honoured, note: "after the image's environment"},
	{name: "WorkingDir", t: honoured},
	{name: "User", t: honoured, note: "resolved in the sandbox, as boxd's --user"},
	{name: "Labels", t: honoured, note: "boxd labels"},
	{name: "Tty", t: honoured, note: "the main command gets a terminal; logs are raw"},
	{name: "OpenStdin", t: honoured, note: "the main command's stdin stays open"},
	{name: "Hostname", t: honoured, note: "the sandbox's hostname"},
	{name: "StopSignal", t: honoured, note: "what stop sends first"},
	{name: "StopTimeout", t: honoured, note: "stop's default grace"},
	{name: "HostConfig", t: honoured, note: "see the HostConfig table"},
	{name: "AttachStdin", t: ignored, note: "attach is the client's choice"},
	{name: "AttachStdout", t: ignored},
	{name: "AttachStderr", t: ignored},
	{name: "StdinOnce", t: ignored},
	{name: "ArgsEscaped", t: ignored, note: "Windows only"},
	{name: "Domainname", t: ignored},
	{name: "ExposedPorts", t: ignored, note: "metadata; publishing is PortBindings"},
	{name: "Volumes", t: ignored, note: "anonymous volumes are directories of the sandbox's own layer"},
	{name: "Healthcheck", t: ignored},
	{name: "OnBuild", t: ignored},
	{name: "Shell", t: ignored},
	{name: "MacAddress", t: ignored},
	{name: "NetworkingConfig", t: ignored, note: "networks are NetworkMode's"},
	{name: "NetworkDisabled", t: ignored, note: "a sandbox has no network unless NetworkMode gives one"},
	{name: "name", t: ignored, note: "dockerode sends it in the body too; the query's name is the container's"},
}

var hostConfigFields = []fieldRule{
	{name: "Memory", t: honoured, note: "memory limit (bytes)"},
	{name: "NanoCpus", t: honoured, note: "CPU limit"},
	{name: "CpuQuota", t: honoured, note: "with CpuPeriod: CPU limit quota/period"},
	{name: "CpuPeriod", t: honoured, note: "with CpuQuota"},
	{name: "PidsLimit", t: honoured, note: "pids limit"},
	{name: "AutoRemove", t: honoured, note: "the sandbox is deleted when the main command exits"},
	{name: "ReadonlyRootfs", t: honoured, note: "read-only root file system"},
	{name: "NetworkMode", t: honoured, check: checkNetworkMode,
		note: "`none`; `default` and `bridge` map to --docker-default-network (none unless set); anything else refused"},
	{name: "StorageOpt", t: honoured, check: checkStorageOpt, note: "`size` only: the disk cap"},
	{name: "RestartPolicy", t: honoured, check: checkRestartPolicy, note: "`no` (or empty) only; anything else is a 400"},
	{name: "Runtime", t: honoured, check: checkRuntime, note: "`runc`, or `runsc`/`gvisor` for gVisor; any other refused"},
	{name: "SecurityOpt", t: honoured, check: checkSecurityOpt, note: "`no-new-privileges` (always on); anything else refused"},
	{name: "PidMode", t: honoured, check: checkPrivateMode("PidMode"), note: "private only; host or container: refused"},
	{name: "IpcMode", t: honoured, check: checkPrivateMode("IpcMode"), note: "private only; host or container: refused"},
	{name: "UTSMode", t: honoured, check: checkPrivateMode("UTSMode"), note: "private only; host refused"},
	{name: "UsernsMode", t: honoured, check: checkPrivateMode("UsernsMode"), note: "boxd's user namespace only; host refused"},
	{name: "CgroupnsMode", t: honoured, check: checkPrivateMode("CgroupnsMode"), note: "private only; host refused"},
	{name: "Binds", t: honoured, note: "a host path as create --bind (under --allow-bind, checked as the caller; options ro, rw, noexec); a name as a boxd volume (create --volume)"},
	{name: "Mounts", t: honoured, note: "type bind and volume as Binds; tmpfs ignored as Tmpfs; BindOptions, VolumeOptions and other types refused"},
	{name: "PortBindings", t: honoured, note: "published ports (tcp): an empty HostIp is 127.0.0.1; other addresses need --allow-publish-address; host ports below ip_unprivileged_port_start are an admin's"},
	{name: "Isolation", t: ignored, note: "Windows only"},
	{name: "ConsoleSize", t: ignored},
	{name: "LogConfig", t: ignored, note: "logs are kept by boxd"},
	{name: "ContainerIDFile", t: ignored, note: "the client's"},
	{name: "Dns", t: ignored, note: "egress sandboxes use boxd's resolver"},
	{name: "DnsOptions", t: ignored},
	{name: "DnsSearch", t: ignored},
	{name: "ExtraHosts", t: ignored},
	{name: "GroupAdd", t: ignored},
	{name: "OomScoreAdj", t: ignored},
	{name: "PublishAllPorts", t: ignored},
	{name: "ShmSize", t: ignored, note: "boxd sizes /dev/shm from the memory limit"},
	{name: "Tmpfs", t: ignored},
	{name: "Ulimits", t: ignored},
	{name: "CpuShares", t: ignored},
	{name: "CpusetCpus", t: ignored},
	{name: "CpusetMems", t: ignored},
	{name: "CpuCount", t: ignored, note: "Windows only"},
	{name: "CpuPercent", t: ignored, note: "Windows only"},
	{name: "CpuRealtimePeriod", t: ignored},
	{name: "CpuRealtimeRuntime", t: ignored},
	{name: "BlkioWeight", t: ignored},
	{name: "BlkioWeightDevice", t: ignored},
	{name: "BlkioDeviceReadBps", t: ignored},
	{name: "BlkioDeviceWriteBps", t: ignored},
	{name: "BlkioDeviceReadIOps", t: ignored},
	{name: "BlkioDeviceWriteIOps", t: ignored},
	{name: "IOMaximumIOps", t: ignored, note: "Windows only"},
	{name: "IOMaximumBandwidth", t: ignored, note: "Windows only"},
	{name: "KernelMemory", t: ignored},
	{name: "KernelMemoryTCP", t: ignored},
	{name: "MemoryReservation", t: ignored},
	{name: "MemorySwap", t: ignored, note: "boxd sandboxes do not swap"},
	{name: "MemorySwappiness", t: ignored},
	{name: "Init", t: ignored, note: "boxd's init always runs"},
	{name: "CapDrop", t: ignored, note: "boxd's capability set is already minimal"},
	{name: "Annotations", t: ignored},
	{name: "Privileged", t: refused},
	{name: "CapAdd", t: refused},
	{name: "Devices", t: refused},
	{name: "DeviceRequests", t: refused},
	{name: "DeviceCgroupRules", t: refused},
	{name: "CgroupParent", t: refused},
	{name: "Cgroup", t: refused},
	{name: "VolumesFrom", t: refused},
	{name: "VolumeDriver", t: refused},
	{name: "OomKillDisable", t: refused},
	{name: "Sysctls", t: refused},
	{name: "Links", t: refused},
	{name: "MaskedPaths", t: refused, note: "boxd's masked paths are fixed"},
	{name: "ReadonlyPaths", t: refused, note: "boxd's read-only paths are fixed"},
}

var execFields = []fieldRule{
	{name: "Cmd", t: honoured},
	{name: "Env", t: honoured},
	{name: "WorkingDir", t: honoured},
	{name: "User", t: honoured},
	{name: "Tty", t: honoured},
	{name: "AttachStdin", t: honoured, note: "stdin is streamed from the hijacked connection"},
	{name: "AttachStdout", t: honoured},
	{name: "AttachStderr", t: honoured},
	{name: "Detach", t: ignored, note: "start's own Detach decides"},
	{name: "Container", t: ignored, note: "docker-py sends it; the path names the container"},
	{name: "DetachKeys", t: ignored},
	{name: "ConsoleSize", t: ignored},
	{name: "Privileged", t: refused},
}

// checkFields applies rules to the object raw (prefix names its fields in
// errors): a refused or unknown non-zero field, or an honoured field's
// refused value, is a 400.
func checkFields(raw json.RawMessage, prefix string, rules []fieldRule) error {
	if isZero(raw) {
		return nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return errf(http.StatusBadRequest, "%s: not a JSON object: %v", strings.TrimSuffix(prefix, "."), err)
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := obj[k]
		rule, ok := findRule(rules, k)
		switch {
		case !ok && !isZero(v):
			return errf(http.StatusBadRequest, "%s%s: boxd does not know this field, and refuses fields it does not know (see docs/docker.md)", prefix, k)
		case !ok:
		case rule.t == refused && !isZero(v):
			return errf(http.StatusBadRequest, "%s%s: refused by boxd%s", prefix, k, noteSuffix(rule.note))
		case rule.check != nil && !isZero(v):
			if why := rule.check(v); why != "" {
				return errf(http.StatusBadRequest, "%s%s: %s", prefix, k, why)
			}
		}
	}
	return nil
}

func noteSuffix(n string) string {
	if n == "" {
		return ""
	}
	return " (" + n + ")"
}

func findRule(rules []fieldRule, name string) (fieldRule, bool) {
	for _, r := range rules {
		if r.name == name {
			return r, true
		}
	}
	return fieldRule{}, false
}

// isZero is what Docker's clients send for a field they did not set:
// absent, null, false, 0, "", [], {} (or an object of zero fields).
func isZero(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	switch string(t) {
	case "", "null", "false", "0", `""`, "[]", "{}":
		return true
	}
	if t[0] == '{' {
		var obj map[string]json.RawMessage
		if json.Unmarshal(t, &obj) != nil {
			return false
		}
		for _, v := range obj {
			if !isZero(v) {
				return false
			}
		}
		return true
	}
	if t[0] == '[' {
		var arr []json.RawMessage
		if json.Unmarshal(t, &arr) != nil {
			return false
		}
		for _, v := range arr {
			if !isZero(v) {
				return false
			}
		}
		return true
	}
	return false
}

func str(raw json.RawMessage) string {
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

func checkNetworkMode(raw json.RawMessage) string {
	switch str(raw) {
	case "none", "default", "bridge":
		return ""
	}
	return fmt.Sprintf("%q refused: boxd serves none, default and bridge (which map to the administrator's --docker-default-network)", str(raw))
}

func checkPrivateMode(field string) func(json.RawMessage) string {
	return func(raw json.RawMessage) string {
		switch v := str(raw); v {
		case "private", "shareable", "none":
			if field == "IpcMode" || v == "private" {
				return ""
			}
		}
		return fmt.Sprintf("%q refused: a sandbox shares no namespace with the host or another container", str(raw))
	}
}

func checkStorageOpt(raw json.RawMessage) string {
	var m map[string]string
	if err := json.Unmarshal(raw, &m); err != nil {
		return "not an object of strings"
	}
	for k := range m {
		if k != "size" {
			return fmt.Sprintf("%q refused: only size (the disk cap) is served", k)
		}
	}
	return ""
}

func checkRestartPolicy(raw json.RawMessage) string {
	var p struct{ Name string }
	if err := json.Unmarshal(raw, &p); err != nil {
		return "not an object"
	}
	if p.Name != "" && p.Name != "no" {
		return fmt.Sprintf("%q refused: boxd restarts no container (only \"no\" is served)", p.Name)
	}
	return ""
}

func checkRuntime(raw json.RawMessage) string {
	if _, ok := boxdRuntime(str(raw)); !ok {
		return fmt.Sprintf("%q refused: boxd has runc and runsc (gVisor)", str(raw))
	}
	return ""
}

// boxdRuntime maps a Docker runtime name onto boxd's.
func boxdRuntime(name string) (string, bool) {
	switch name {
	case "":
		return "", true
	case "runc", "io.containerd.runc.v2":
		return "runc", true
	case "runsc", "gvisor", "io.containerd.runsc.v1":
		return "gvisor", true
	}
	return "", false
}

func checkSecurityOpt(raw json.RawMessage) string {
	var opts []string
	if err := json.Unmarshal(raw, &opts); err != nil {
		return "not a list of strings"
	}
	for _, o := range opts {
		switch o {
		case "no-new-privileges", "no-new-privileges=true", "no-new-privileges:true":
			continue
		}
		return fmt.Sprintf("%q refused: boxd's seccomp, AppArmor and no-new-privileges settings are fixed", o)
	}
	return ""
}

// FieldTables renders the three tables as the docs show them.
func FieldTables() string {
	var b strings.Builder
	for _, g := range []struct {
		title string
		rules []fieldRule
	}{{"Container create", createFields}, {"HostConfig", hostConfigFields}, {"Exec create", execFields}} {
		fmt.Fprintf(&b, "### %s\n\n| Field | Table | Notes |\n|---|---|---|\n", g.title)
		for _, t := range []table{honoured, ignored, refused} {
			for _, r := range g.rules {
				if r.t == t {
					fmt.Fprintf(&b, "| `%s` | %s | %s |\n", r.name, tableNames[t], r.note)
				}
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// FieldNames lists the fields of a group's tables ("create",
// "hostconfig", "exec"), for the test that holds them against Docker's
// own client types.
func FieldNames(group string) []string {
	rules := map[string][]fieldRule{"create": createFields, "hostconfig": hostConfigFields, "exec": execFields}[group]
	out := make([]string, 0, len(rules))
	for _, r := range rules {
		out = append(out, r.name)
	}
	return out
}
