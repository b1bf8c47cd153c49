//go:build linux

package dockerapi

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/docker.md's field tables")

// TestFieldTablesDoc keeps docs/docker.md's tables the ones the code
// applies (go test ./internal/dockerapi -run TestFieldTablesDoc -update).
func TestFieldTablesDoc(t *testing.T) {
	page := filepath.Join("..", "..", "docs", "docker.md")
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- fields:begin -->\n", "<!-- fields:end -->"
	i, j := bytes.Index(b, []byte(begin)), bytes.Index(b, []byte(end))
	if i < 0 || j < i {
		t.Fatalf("%s has no %q ... %q block", page, begin, end)
	}
	want := FieldTables()
	if got := string(b[i+len(begin) : j]); got != want {
		if !*update {
			t.Fatalf("%s's field tables are stale: run go test ./internal/dockerapi -run TestFieldTablesDoc -update", page)
		}
		out := append(append(append([]byte(nil), b[:i+len(begin)]...), want...), b[j:]...)
		if err := os.WriteFile(page, out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFieldsInOneTable: a field is in exactly one table of its group.
func TestFieldsInOneTable(t *testing.T) {
	for name, rules := range map[string][]fieldRule{"create": createFields, "HostConfig": hostConfigFields, "exec": execFields} {
		seen := map[string]bool{}
		for _, r := range rules {
			if seen[r.name] {
				t.Errorf("%s: %s is in more than one row", name, r.name)
			}
			seen[r.name] = true
		}
	}
	for _, f := range []string{"Privileged", "CapAdd", "Devices", "DeviceRequests", "DeviceCgroupRules", "CgroupParent", "VolumesFrom",
		"OomKillDisable", "Sysctls"} {
		if r, ok := findRule(hostConfigFields, f); !ok || r.t != refused {
			t.Errorf("HostConfig.%s is not refused", f)
		}
	}
}

func TestCheckFields(t *testing.T) {
	for _, c := range []struct {
		body string
		err  string // "" for accepted
	}{
		{`{"Privileged":false,"CapAdd":null,"Binds":[],"Sysctls":{},"FooBar":0,"LogConfig":{"Type":"","Config":{}}}`, ""},
		{`{"NetworkMode":"default","RestartPolicy":{"Name":"no","MaximumRetryCount":0},"Runtime":"runc","SecurityOpt":["no-new-privileges"]}`, ""},
		{`{"Privileged":true}`, "HostConfig.Privileged: refused by boxd"},
		{`{"CapAdd":["NET_ADMIN"]}`, "HostConfig.CapAdd: refused"},
		{`{"FooBar":{"x":1}}`, "HostConfig.FooBar: boxd does not know this field"},
		{`{"NetworkMode":"host"}`, `HostConfig.NetworkMode: "host" refused`},
		{`{"NetworkMode":"container:abc"}`, `HostConfig.NetworkMode: "container:abc" refused`},
		{`{"PidMode":"host"}`, `HostConfig.PidMode: "host" refused`},
		{`{"IpcMode":"container:x"}`, `HostConfig.IpcMode`},
		{`{"RestartPolicy":{"Name":"on-failure","MaximumRetryCount":3}}`, `HostConfig.RestartPolicy: "on-failure" refused`},
		{`{"SecurityOpt":["seccomp=unconfined"]}`, `HostConfig.SecurityOpt: "seccomp=unconfined" refused`},
		{`{"SecurityOpt":["apparmor=unconfined"]}`, `HostConfig.SecurityOpt`},
		{`{"Runtime":"kata"}`, `HostConfig.Runtime: "kata" refused`},
		{`{"StorageOpt":{"size":"1g","dm.foo":"x"}}`, `HostConfig.StorageOpt: "dm.foo" refused`},
	} {
		err := checkFields(json.RawMessage(c.body), "HostConfig.", hostConfigFields)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s: %v", c.body, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: %v, want %q", c.body, err, c.err)
		}
	}
	if err := checkFields(json.RawMessage(`{"Cmd":["x"],"Privileged":true}`), "", execFields); err == nil || !strings.Contains(err.Error(), "Privileged: refused") {
		t.Errorf("exec Privileged: %v", err)
	}
}

func TestVersions(t *testing.T) {
	for _, c := range []struct {
		a, b string
		less bool
	}{{"1.41", "1.43", true}, {"1.43", "1.43", false}, {"1.9", "1.41", true}, {"2.0", "1.99", false}} {
		if got := versionLess(c.a, c.b); got != c.less {
			t.Errorf("versionLess(%s, %s) = %v", c.a, c.b, got)
		}
	}
}

func TestMuxFraming(t *testing.T) {
	var b bytes.Buffer
	m := &muxWriter{w: &b}
	_, _ = streamWriter{m, streamStdout, false}.Write([]byte("out"))
	_, _ = streamWriter{m, streamStderr, false}.Write([]byte("err!"))
	want := []byte{1, 0, 0, 0, 0, 0, 0, 3, 'o', 'u', 't', 2, 0, 0, 0, 0, 0, 0, 4, 'e', 'r', 'r', '!'}
	if !bytes.Equal(b.Bytes(), want) {
		t.Errorf("framing: %v, want %v", b.Bytes(), want)
	}
}
