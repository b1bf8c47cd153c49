//go:build linux

package e2e

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// TestBadCreateRequests: each mistake gets invalid_argument (or not_found)
// naming the field, and nothing is left behind.
func TestBadCreateRequests(t *testing.T) {
	before := countSandboxes(t)
	for _, tc := range []struct {
		name     string
		req      *boxdv1.CreateSandboxRequest
		code     connect.Code
		mentions string
	}{
		{"malformed memory", &boxdv1.CreateSandboxRequest{Limits: &boxdv1.Limits{Memory: "12xb"}}, connect.CodeInvalidArgument, "limits.memory"},
		{"tiny memory", &boxdv1.CreateSandboxRequest{Limits: &boxdv1.Limits{Memory: "1k"}}, connect.CodeInvalidArgument, "limits.memory"},
		{"huge memory", &boxdv1.CreateSandboxRequest{Limits: &boxdv1.Limits{Memory: "900t"}}, connect.CodeInvalidArgument, "limits.memory"},
		{"negative cpus", &boxdv1.CreateSandboxRequest{Limits: &boxdv1.Limits{Cpus: -1}}, connect.CodeInvalidArgument, "limits.cpus"},
		{"too many cpus", &boxdv1.CreateSandboxRequest{Limits: &boxdv1.Limits{Cpus: 4096}}, connect.CodeInvalidArgument, "limits.cpus"},
		{"negative pids", &boxdv1.CreateSandboxRequest{Limits: &boxdv1.Limits{Pids: -5}}, connect.CodeInvalidArgument, "limits.pids"},
		{"empty env name", &boxdv1.CreateSandboxRequest{Env: []string{"=x"}}, connect.CodeInvalidArgument, "env"},
		{"env without =", &boxdv1.CreateSandboxRequest{Env: []string{"JUSTNAME"}}, connect.CodeInvalidArgument, "env"},
		{"relative workdir", &boxdv1.CreateSandboxRequest{Workdir: "rel/dir"}, connect.CodeInvalidArgument, "workdir"},
		{"bad name", &boxdv1.CreateSandboxRequest{Name: "../etc"}, connect.CodeInvalidArgument, "name"},
		{"bad ttl", &boxdv1.CreateSandboxRequest{Ttl: "forever"}, connect.CodeInvalidArgument, "ttl"},
		{"negative ttl", &boxdv1.CreateSandboxRequest{Ttl: "-1h"}, connect.CodeInvalidArgument, "ttl"},
		{"bad label", &boxdv1.CreateSandboxRequest{Labels: map[string]string{"a b": "c"}}, connect.CodeInvalidArgument, "labels"},
		{"unknown image", &boxdv1.CreateSandboxRequest{Image: "no/such:image"}, connect.CodeNotFound, "no/such:image"},
		{"invalid image ref", &boxdv1.CreateSandboxRequest{Image: "UPPER CASE"}, connect.CodeInvalidArgument, "image"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := env.api.CreateSandbox(ctx(t), connect.NewRequest(tc.req))
			if connect.CodeOf(err) != tc.code || !strings.Contains(err.Error(), tc.mentions) {
				t.Errorf("got %v, want code %v mentioning %q", err, tc.code, tc.mentions)
			}
		})
	}
	// The CLI reports the same, on stderr, with a non-zero exit.
	_, stderr, code := boxctlRun("create", "--memory", "lots")
	if code == 0 || !strings.Contains(stderr, "invalid_argument") || !strings.Contains(stderr, "limits.memory") {
		t.Errorf("boxctl create --memory lots: exit %d, %q", code, stderr)
	}
	if after := countSandboxes(t); after != before {
		t.Errorf("bad requests left %d sandboxes", after-before)
	}
}

func TestUnknownIDs(t *testing.T) {
	for _, args := range [][]string{
		{"inspect", "feedfacecafe"},
		{"rm", "feedfacecafe"},
		{"exec", "feedfacecafe", "--", "true"},
		{"cp", "feedfacecafe:/etc/passwd", t.TempDir()},
		{"exec", "no-such-name", "--", "true"},
	} {
		_, stderr, code := boxctlRun(args...)
		if code == 0 || !strings.Contains(stderr, "not_found") {
			t.Errorf("boxctl %v: exit %d, stderr %q", args, code, stderr)
		}
	}
	// exec reports boxd's own errors with 125, apart from the command's codes.
	if _, _, code := boxctlRun("exec", "feedfacecafe", "--", "true"); code != 125 {
		t.Errorf("exec in unknown sandbox exit = %d, want 125", code)
	}
	if _, err := boxctl(nil, "rm", "-f", "feedfacecafe"); err != nil {
		t.Errorf("rm -f of a missing sandbox: %v", err)
	}
}

func TestBadExecRequests(t *testing.T) {
	id := newSandbox(t)
	for _, tc := range []struct {
		req      *boxdv1.ExecRequest
		mentions string
	}{
		{&boxdv1.ExecRequest{SandboxId: id}, "args"},
		{&boxdv1.ExecRequest{SandboxId: id, Args: []string{""}}, "args"},
		{&boxdv1.ExecRequest{SandboxId: id, Args: []string{"true"}, Timeout: "soon"}, "timeout"},
		{&boxdv1.ExecRequest{SandboxId: id, Args: []string{"true"}, Env: []string{"1BAD=x"}}, "env"},
		{&boxdv1.ExecRequest{SandboxId: id, Args: []string{"true"}, Workdir: "relative"}, "workdir"},
		{&boxdv1.ExecRequest{SandboxId: "", Args: []string{"true"}}, "id"},
	} {
		_, err := env.api.Exec(ctx(t), connect.NewRequest(tc.req))
		if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), tc.mentions) {
			t.Errorf("exec %+v: %v; want invalid_argument naming %q", tc.req, err, tc.mentions)
		}
	}
	// A request bigger than the message limit is refused whole.
	_, err := env.api.Exec(ctx(t), connect.NewRequest(&boxdv1.ExecRequest{SandboxId: id, Args: []string{"true"}, Stdin: make([]byte, 9<<20)}))
	if err == nil {
		t.Errorf("a 9 MiB request was accepted")
	}
	if got := sh(t, id, "echo still fine"); got != "still fine\n" {
		t.Errorf("after bad requests: %q", got)
	}
}

// A path through a file (/etc/hostname/x) is the caller's mistake, named
// as such, not an internal error; a missing one is not_found.
func TestBadCopyPaths(t *testing.T) {
	id := newSandbox(t)
	for path, want := range map[string]connect.Code{
		"/etc/hostname/x": connect.CodeFailedPrecondition,
		"/no/such/path":   connect.CodeNotFound,
	} {
		err := drainStream(env.api.CopyOut(ctx(t), connect.NewRequest(&boxdv1.CopyOutRequest{SandboxId: id, Path: path})))
		if connect.CodeOf(err) != want || !strings.Contains(err.Error(), path) {
			t.Errorf("copy out of %s: %v; want %s naming the path", path, err, want)
		}
		_, err = env.api.StatPath(ctx(t), connect.NewRequest(&boxdv1.StatPathRequest{SandboxId: id, Path: path}))
		if c := connect.CodeOf(err); c != want && c != connect.CodeNotFound {
			t.Errorf("stat of %s: %v; want %s or not_found", path, err, want)
		}
	}
}

// TestGarbageOnTheSocket: junk, half requests and vanished clients leave
// boxd serving.
func TestGarbageOnTheSocket(t *testing.T) {
	for _, junk := range [][]byte{
		[]byte("\x00\x01\x02garbage\r\n\r\n"),
		[]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\xff\xff\xff\xff\xff\xff\xff\xff\xff"),
		[]byte("POST /boxd.v1.SandboxService/CreateSandbox HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"image\":"),
		bytes.Repeat([]byte("A"), 1<<20),
	} {
		c, err := net.Dial("unix", env.socket)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		_, _ = c.Write(junk)
		_, _ = io.Copy(io.Discard, io.LimitReader(c, 1<<16))
		c.Close()
	}
	// Malformed JSON gets a clear error, not a crash.
	resp := postJSON(t, "CreateSandbox", `{"limits": {"memory": 5}}`)
	if resp.status != http.StatusBadRequest || !strings.Contains(resp.body, "invalid_argument") {
		t.Errorf("malformed JSON: %d %s", resp.status, resp.body)
	}
	// A client that vanishes mid-exec does not hurt the daemon.
	id := newSandbox(t)
	c, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, _ = env.api.Exec(c, connect.NewRequest(&boxdv1.ExecRequest{SandboxId: id, Args: []string{"sleep", "30"}}))
	cancel()
	// The abandoned command is killed with its client.
	deadline := time.Now().Add(5 * time.Second)
	for {
		out := sh(t, id, "ps -o args | grep '^sleep 30' || true")
		if strings.TrimSpace(out) == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("command of a vanished client still runs: %q", out)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := env.api.ListSandboxes(ctx(t), connect.NewRequest(&boxdv1.ListSandboxesRequest{})); err != nil {
		t.Fatalf("boxd stopped answering after garbage: %v", err)
	}
}
