//go:build linux

package dockerapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/containerd/errdefs"

	"github.com/boxd-dev/boxd/runtime"
)

// TestMountRequest: Binds, Mounts and PortBindings become boxd's binds,
// volumes and published ports, and boxd's errors about them name the
// Docker field they came from.
func TestMountRequest(t *testing.T) {
	var hc hostConfig
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(json.Unmarshal([]byte(`{"Binds":["/srv/a:/a:ro","vol:/v"],
		"Mounts":[{"Type":"tmpfs","Target":"/t"},{"Type":"bind","Source":"/srv/b","Target":"/b","ReadOnly":true},{"Type":"volume","Source":"v2","Target":"/v2"}],
		"PortBindings":{"8080/tcp":[{"HostIp":"","HostPort":""},{"HostIp":"127.0.0.1","HostPort":"9000"}]}}`), &hc))
	var req runtime.CreateRequest
	o, err := mountRequest(hc, &req)
	must(err)
	if fmt.Sprint(req.Binds) != "[/srv/a:/a:ro /srv/b:/b:ro]" || fmt.Sprint(req.Volumes) != "[vol:/v v2:/v2]" || len(req.Publish) != 2 ||
		req.Publish[1].HostPort != 9000 || req.Publish[0].Port != 8080 || req.Publish[0].Protocol != "tcp" {
		t.Errorf("request: %v %v %+v", req.Binds, req.Volumes, req.Publish)
	}
	for _, c := range []struct {
		err  error
		want string
	}{
		{&runtime.FieldError{Field: "binds[1]", Msg: "outside"}, "HostConfig.Mounts[1]: outside"},
		{fmt.Errorf("binds[0]: %q leads out: %w", "/srv/a", errdefs.ErrPermissionDenied), `HostConfig.Binds[0]: "/srv/a" leads out`},
		{&runtime.FieldError{Field: "volumes[1]", Msg: "x"}, "HostConfig.Mounts[2]: x"},
		{&runtime.FieldError{Field: "publish[1].host_ip", Msg: "not loopback"}, `HostConfig.PortBindings["8080/tcp"]: host_ip: not loopback`},
		{fmt.Errorf("volume %q not found: %w", "v2", errdefs.ErrNotFound), `HostConfig.Mounts[2]: volume "v2" not found (make it with boxctl volume create)`},
	} {
		var he *httpError
		if got := originField(c.err, o); !errors.As(got, &he) || he.code != http.StatusBadRequest || he.msg != c.want {
			t.Errorf("%v: %v, want 400 %q", c.err, got, c.want)
		}
	}
	for _, bad := range []string{`{"Mounts":[{"Type":"bind","Source":"/x","Target":"/y","BindOptions":{"Propagation":"rshared"}}]}`,
		`{"Mounts":[{"Type":"npipe","Source":"x","Target":"/y"}]}`, `{"Mounts":[{"Type":"bind","Source":"rel","Target":"/y"}]}`,
		`{"PortBindings":{"80-90/tcp":[{}]}}`, `{"PortBindings":{"80/tcp":[{"HostPort":"1-2"}]}}`} {
		var hc hostConfig
		must(json.Unmarshal([]byte(bad), &hc))
		if _, err := mountRequest(hc, &runtime.CreateRequest{}); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}
