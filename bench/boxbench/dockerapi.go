//go:build linux

package main

// A small Docker Engine API client: raw HTTP over the private dockerd's Unix
// socket with net/http, so the benchmark measures what any client of the
// Engine API pays (JSON, an exec object, a hijacked stream, an inspect for
// the exit code) without adding the Docker Go SDK to the module.

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"
)

// dockerAPIVersion is the Engine API version of docker.io 20.10 (Debian
// bookworm). Pinning it skips version negotiation on every request.
const dockerAPIVersion = "v1.41"

type dockerAPI struct {
	hc    *http.Client
	image string
	// limits mirror boxd's defaults (512m, no swap, 1 CPU, 256 pids) so
	// both set up the same cgroup controls.
	memory, nanoCPUs, pids int64
}

func newDockerAPI(sock, image string) *dockerAPI {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
		// The concurrency and burst scenarios run up to a few hundred
		// requests at once; keep their connections for reuse.
		MaxIdleConns:        512,
		MaxIdleConnsPerHost: 512,
		IdleConnTimeout:     90 * time.Second,
	}
	return &dockerAPI{hc: &http.Client{Transport: tr}, image: image, memory: 512 << 20, nanoCPUs: 1e9, pids: 256}
}

func (d *dockerAPI) name() string { return "Docker Engine API" }

// apiError is a non-2xx answer; docker puts the reason in {"message": ...}.
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string { return fmt.Sprintf("docker API: HTTP %d: %s", e.status, e.msg) }

func (d *dockerAPI) newRequest(ctx context.Context, method, path string, body any) (*http.Request, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://docker/"+dockerAPIVersion+path, r)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

// do sends a JSON request and decodes a JSON answer into out (if not nil).
func (d *dockerAPI) do(ctx context.Context, method, path string, body, out any) error {
	req, err := d.newRequest(ctx, method, path, body)
	if err != nil {
		return err
	}
	resp, err := d.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var m struct{ Message string }
		_ = json.Unmarshal(data, &m)
		if m.Message == "" {
			m.Message = string(data)
		}
		return &apiError{resp.StatusCode, m.Message}
	}
	if out != nil && len(data) > 0 {
		return json.Unmarshal(data, out)
	}
	return nil
}

// createContainer creates (not starts) a container running cmd, with no
// network (like boxd's sandboxes) and boxd's default limits.
func (d *dockerAPI) createContainer(ctx context.Context, name string, cmd []string) (string, error) {
	body := map[string]any{
		"Image":      d.image,
		"Cmd":        cmd,
		"WorkingDir": "/workspace", // created by dockerd at start, like boxd's
		"Labels":     map[string]string{"boxbench": "1"},
		"HostConfig": map[string]any{
			"NetworkMode": "none",
			"Memory":      d.memory,
			"MemorySwap":  d.memory,
			"NanoCpus":    d.nanoCPUs,
			"PidsLimit":   d.pids,
		},
	}
	path := "/containers/create"
	if name != "" {
		path += "?name=" + url.QueryEscape(name)
	}
	var out struct{ Id string }
	if err := d.do(ctx, http.MethodPost, path, body, &out); err != nil {
		return "", err
	}
	return out.Id, nil
}

func (d *dockerAPI) startContainer(ctx context.Context, id string) error {
	return d.do(ctx, http.MethodPost, "/containers/"+id+"/start", nil, nil)
}

// create makes a running, idle sandbox: a container whose PID 1 sleeps.
func (d *dockerAPI) create(ctx context.Context) (string, error) {
	id, err := d.createContainer(ctx, "", []string{"sleep", "1000000000"})
	if err != nil {
		return "", err
	}
	if err := d.startContainer(ctx, id); err != nil {
		_ = d.remove(context.WithoutCancel(ctx), id)
		return "", err
	}
	return id, nil
}

// remove kills and deletes a container with its anonymous volumes.
func (d *dockerAPI) remove(ctx context.Context, id string) error {
	return d.do(ctx, http.MethodDelete, "/containers/"+id+"?force=1&v=1", nil, nil)
}

// list returns the ids of all containers, running or not.
func (d *dockerAPI) list(ctx context.Context) ([]string, error) {
	var out []struct{ Id string }
	if err := d.do(ctx, http.MethodGet, "/containers/json?all=1", nil, &out); err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(out))
	for _, c := range out {
		ids = append(ids, c.Id)
	}
	return ids, nil
}

func (d *dockerAPI) version(ctx context.Context) (string, error) {
	var v struct{ Version, APIVersion string }
	if err := d.do(ctx, http.MethodGet, "/version", nil, &v); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s (API %s)", v.Version, v.APIVersion), nil
}

// exec runs args in container id the way `docker exec` does: create an
// exec object, start it attached (the daemon hijacks the connection and
// streams multiplexed stdout/stderr until the process's output closes),
// then inspect it for the exit code.
func (d *dockerAPI) exec(ctx context.Context, id string, args ...string) ([]byte, int, error) {
	var created struct{ Id string }
	err := d.do(ctx, http.MethodPost, "/containers/"+id+"/exec",
		map[string]any{"Cmd": args, "AttachStdout": true, "AttachStderr": true}, &created)
	if err != nil {
		return nil, -1, err
	}
	req, err := d.newRequest(ctx, http.MethodPost, "/exec/"+created.Id+"/start", map[string]any{"Detach": false, "Tty": false})
	if err != nil {
		return nil, -1, err
	}
	// Ask for the upgrade the docker CLI asks for; net/http then hands back
	// the raw connection as the body of the 101 response.
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "tcp")
	resp, err := d.hc.Do(req)
	if err != nil {
		return nil, -1, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols && resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return nil, -1, &apiError{resp.StatusCode, string(data)}
	}
	var stdout, stderr bytes.Buffer
	err = demux(resp.Body, &stdout, &stderr)
	resp.Body.Close()
	if err != nil {
		return nil, -1, fmt.Errorf("exec stream: %w", err)
	}
	// The stream can end a moment before dockerd records the exit code
	// (the output pipes close before the exit event is processed), so poll
	// briefly, as a careful client must.
	for i := 0; ; i++ {
		var st struct {
			Running  bool
			ExitCode int
		}
		if err := d.do(ctx, http.MethodGet, "/exec/"+created.Id+"/json", nil, &st); err != nil {
			return nil, -1, err
		}
		if !st.Running {
			if st.ExitCode != 0 && stderr.Len() > 0 {
				return stdout.Bytes(), st.ExitCode, fmt.Errorf("exit %d: %s", st.ExitCode, bytes.TrimSpace(stderr.Bytes()))
			}
			return stdout.Bytes(), st.ExitCode, nil
		}
		if i > 2000 {
			return nil, -1, errors.New("exec still running 2 s after its stream ended")
		}
		time.Sleep(time.Millisecond)
	}
}

// demux splits Docker's multiplexed stream: frames of an 8-byte header
// (stream type, 3 zero bytes, big-endian length) and the payload.
func demux(r io.Reader, stdout, stderr io.Writer) error {
	var hdr [8]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		w := stdout
		if hdr[0] == 2 {
			w = stderr
		}
		if _, err := io.CopyN(w, r, int64(binary.BigEndian.Uint32(hdr[4:]))); err != nil {
			return err
		}
	}
}
