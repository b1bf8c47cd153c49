// Command dockergo drives boxd's Docker endpoint with Docker's own Go
// client (github.com/docker/docker/client), a client boxd did not write.
// It is a module of its own so boxd never links Docker's client.
//
//	dockergo flow SOCKET IMAGE   a sandbox wrapper's flow; prints ok
//	dockergo fields              the JSON field names of the client's
//	                             create, HostConfig and exec types
package main

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
	"github.com/docker/docker/errdefs"
	"github.com/docker/docker/pkg/stdcopy"
)

func main() {
	var err error
	switch {
	case len(os.Args) == 2 && os.Args[1] == "fields":
		err = json.NewEncoder(os.Stdout).Encode(map[string][]string{
			"create":     jsonFields(reflect.TypeOf(container.Config{}), "HostConfig", "NetworkingConfig"),
			"hostconfig": jsonFields(reflect.TypeOf(container.HostConfig{})),
			"exec":       jsonFields(reflect.TypeOf(container.ExecOptions{})),
		})
	case len(os.Args) == 4 && os.Args[1] == "flow":
		err = flow(os.Args[2], os.Args[3])
		if err == nil {
			fmt.Println("ok")
		}
	default:
		err = errors.New("usage: dockergo flow SOCKET IMAGE | dockergo fields")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dockergo:", err)
		os.Exit(1)
	}
}

// jsonFields lists the JSON names of t's fields, embedded structs'
// flattened as encoding/json flattens them, plus extra.
func jsonFields(t reflect.Type, extra ...string) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			out = append(out, jsonFields(f.Type)...)
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, name)
	}
	return append(out, extra...)
}

func flow(sock, image string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.NewClientWithOpts(client.WithHost("unix://"+sock), client.WithAPIVersionNegotiation())
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Ping(ctx); err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	pids := int64(64)
	created, err := c.ContainerCreate(ctx, &container.Config{Image: image, Cmd: []string{"sleep", "300"}, Labels: map[string]string{"boxd.test": "go"}},
		&container.HostConfig{NetworkMode: "none", Resources: container.Resources{Memory: 64 << 20, NanoCPUs: 5e8, PidsLimit: &pids}}, nil, nil, "goflow")
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	id := created.ID
	defer c.ContainerRemove(context.Background(), id, container.RemoveOptions{Force: true})
	if err := c.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	if err := execCheck(ctx, c, id); err != nil {
		return err
	}
	if err := archiveCheck(ctx, c, id); err != nil {
		return err
	}
	if err := lifecycleCheck(ctx, c, id); err != nil {
		return err
	}
	if err := logsWaitCheck(ctx, c, image); err != nil {
		return err
	}
	return refusedCheck(ctx, c, image)
}

// execCheck: separate stdout and stderr and an exit code; an exec whose
// caller gives up after a timeout leaves it running, visible in inspect.
func execCheck(ctx context.Context, c *client.Client, id string) error {
	stdout, stderr, code, err := execRun(ctx, c, id, []string{"sh", "-c", "echo O; echo E >&2; exit 3"})
	if err != nil || stdout != "O\n" || stderr != "E\n" || code != 3 {
		return fmt.Errorf("exec: %q %q %d %v", stdout, stderr, code, err)
	}
	ex, err := c.ContainerExecCreate(ctx, id, container.ExecOptions{Cmd: []string{"sleep", "30"}, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return fmt.Errorf("exec create: %w", err)
	}
	tctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	att, err := c.ContainerExecAttach(tctx, ex.ID, container.ExecAttachOptions{})
	if err != nil {
		return fmt.Errorf("exec attach: %w", err)
	}
	<-tctx.Done()
	att.Close()
	in, err := c.ContainerExecInspect(ctx, ex.ID)
	if err != nil || !in.Running {
		return fmt.Errorf("exec inspect after a timeout: %+v %v", in, err)
	}
	return nil
}

func execRun(ctx context.Context, c *client.Client, id string, cmd []string) (string, string, int, error) {
	ex, err := c.ContainerExecCreate(ctx, id, container.ExecOptions{Cmd: cmd, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return "", "", 0, err
	}
	att, err := c.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
	if err != nil {
		return "", "", 0, err
	}
	defer att.Close()
	var o, e bytes.Buffer
	if _, err := stdcopy.StdCopy(&o, &e, att.Reader); err != nil {
		return "", "", 0, err
	}
	in, err := c.ContainerExecInspect(ctx, ex.ID)
	return o.String(), e.String(), in.ExitCode, err
}

// archiveCheck writes a file with a tar PUT and reads it back.
func archiveCheck(ctx context.Context, c *client.Client, id string) error {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	data := []byte("from the Go client\n")
	_ = tw.WriteHeader(&tar.Header{Name: "hello.txt", Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg})
	_, _ = tw.Write(data)
	_ = tw.Close()
	if err := c.CopyToContainer(ctx, id, "/tmp", &b, container.CopyToContainerOptions{}); err != nil {
		return fmt.Errorf("copy to: %w", err)
	}
	rc, st, err := c.CopyFromContainer(ctx, id, "/tmp/hello.txt")
	if err != nil {
		return fmt.Errorf("copy from: %w", err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	h, err := tr.Next()
	if err != nil {
		return fmt.Errorf("copy from: %w", err)
	}
	got, _ := io.ReadAll(tr)
	if h.Name != "hello.txt" || string(got) != string(data) || st.Size != int64(len(data)) {
		return fmt.Errorf("copy from: %s %q %+v", h.Name, got, st)
	}
	return nil
}

// lifecycleCheck: stats, pause and unpause, list by label, inspect's limits.
func lifecycleCheck(ctx context.Context, c *client.Client, id string) error {
	st, err := c.ContainerStatsOneShot(ctx, id)
	if err != nil {
		return fmt.Errorf("stats: %w", err)
	}
	var s container.StatsResponse
	err = json.NewDecoder(st.Body).Decode(&s)
	st.Body.Close()
	if err != nil || s.MemoryStats.Limit != 64<<20 || s.PidsStats.Current == 0 {
		return fmt.Errorf("stats: %+v %v", s.MemoryStats, err)
	}
	if err := c.ContainerPause(ctx, id); err != nil {
		return fmt.Errorf("pause: %w", err)
	}
	if in, err := c.ContainerInspect(ctx, id); err != nil || !in.State.Paused {
		return fmt.Errorf("inspect after pause: %v", err)
	}
	if err := c.ContainerUnpause(ctx, id); err != nil {
		return fmt.Errorf("unpause: %w", err)
	}
	list, err := c.ContainerList(ctx, container.ListOptions{Filters: filters.NewArgs(filters.Arg("label", "boxd.test=go"))})
	if err != nil || len(list) != 1 || list[0].ID != id {
		return fmt.Errorf("list by label: %+v %v", list, err)
	}
	in, err := c.ContainerInspect(ctx, id)
	if err != nil || in.HostConfig.Memory != 64<<20 || in.HostConfig.NanoCPUs != 5e8 || *in.HostConfig.PidsLimit != 64 || in.Name != "/goflow" {
		return fmt.Errorf("inspect: %v", err)
	}
	timeout := 1
	if err := c.ContainerStop(ctx, id, container.StopOptions{Timeout: &timeout}); err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	if err := c.ContainerRemove(ctx, id, container.RemoveOptions{}); err != nil {
		return fmt.Errorf("remove: %w", err)
	}
	return nil
}

// logsWaitCheck: a command that ends on its own; wait, then its logs.
func logsWaitCheck(ctx context.Context, c *client.Client, image string) error {
	created, err := c.ContainerCreate(ctx, &container.Config{Image: image, Cmd: []string{"sh", "-c", "echo out; echo err >&2; exit 4"}},
		&container.HostConfig{AutoRemove: false}, nil, nil, "")
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	id := created.ID
	defer c.ContainerRemove(context.Background(), id, container.RemoveOptions{Force: true})
	waitC, errC := c.ContainerWait(ctx, id, container.WaitConditionNextExit)
	if err := c.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	select {
	case w := <-waitC:
		if w.StatusCode != 4 {
			return fmt.Errorf("wait: %d", w.StatusCode)
		}
	case err := <-errC:
		return fmt.Errorf("wait: %w", err)
	}
	rc, err := c.ContainerLogs(ctx, id, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		return fmt.Errorf("logs: %w", err)
	}
	defer rc.Close()
	var o, e bytes.Buffer
	if _, err := stdcopy.StdCopy(&o, &e, rc); err != nil || o.String() != "out\n" || e.String() != "err\n" {
		return fmt.Errorf("logs: %q %q %v", o.String(), e.String(), err)
	}
	return nil
}

// refusedCheck: a refused field is the client's invalid-parameter error
// (a 400) naming the field.
func refusedCheck(ctx context.Context, c *client.Client, image string) error {
	_, err := c.ContainerCreate(ctx, &container.Config{Image: image, Cmd: []string{"true"}}, &container.HostConfig{Privileged: true}, nil, nil, "")
	if !errdefs.IsInvalidParameter(err) || !strings.Contains(err.Error(), "HostConfig.Privileged") {
		return fmt.Errorf("privileged create: %v", err)
	}
	_, err = c.ContainerInspect(ctx, "no-such-container")
	if !errdefs.IsNotFound(err) {
		return fmt.Errorf("inspect of a missing container: %v", err)
	}
	return nil
}
