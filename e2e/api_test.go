//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
)

type httpResult struct {
	status int
	body   string
}

// postJSON calls a method the way curl --unix-socket does: HTTP/1.1, JSON.
func postJSON(t *testing.T, method, body string) httpResult {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", env.socket)
	}}}
	resp, err := hc.Post("http://localhost/boxd.v1.SandboxService/"+method, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.ProtoMajor != 1 {
		t.Errorf("expected HTTP/1.1 for a curl-like client, got %s", resp.Proto)
	}
	return httpResult{resp.StatusCode, string(b)}
}

// TestJSONOverHTTP is the curl path of docs/clients.md.
func TestJSONOverHTTP(t *testing.T) {
	r := postJSON(t, "CreateSandbox", `{"limits":{"memory":"64m"},"labels":{"via":"curl"}}`)
	if r.status != 200 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	var created struct {
		Sandbox struct {
			ID string `json:"id"`
		} `json:"sandbox"`
	}
	if err := json.Unmarshal([]byte(r.body), &created); err != nil || created.Sandbox.ID == "" {
		t.Fatalf("create body %s: %v", r.body, err)
	}
	id := created.Sandbox.ID
	defer postJSON(t, "DeleteSandbox", `{"id":"`+id+`"}`)

	r = postJSON(t, "Exec", `{"sandboxId":"`+id+`","args":["sh","-c","echo hi; exit 4"]}`)
	var ex struct {
		Stdout string `json:"stdout"` // bytes are base64 in JSON
		Result struct {
			ExitCode int `json:"exitCode"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(r.body), &ex); err != nil || ex.Stdout != "aGkK" || ex.Result.ExitCode != 4 {
		t.Errorf("exec via JSON: %d %s (%v)", r.status, r.body, err)
	}
	r = postJSON(t, "GetSandbox", `{"id":"0000deadbeef"}`)
	if r.status != 404 || !strings.Contains(r.body, `"code":"not_found"`) {
		t.Errorf("unknown id via JSON: %d %s", r.status, r.body)
	}
	r = postJSON(t, "DeleteSandbox", `{"id":"`+id+`"}`)
	if r.status != 200 {
		t.Errorf("delete: %d %s", r.status, r.body)
	}
	assertGone(t, id)
}

// TestGRPCProtocol: a plain gRPC client reaches the same handlers.
func TestGRPCProtocol(t *testing.T) {
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", env.socket)
		},
		Protocols: func() *http.Protocols { p := new(http.Protocols); p.SetUnencryptedHTTP2(true); return p }(),
	}}
	api := boxdv1connect.NewSandboxServiceClient(hc, "http://boxd", connect.WithGRPC())
	id := newSandbox(t)
	stream, err := api.ExecStream(ctx(t), connect.NewRequest(&boxdv1.ExecRequest{SandboxId: id, Args: []string{"sh", "-c", "echo a; echo b >&2"}}))
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut string
	var code int32 = -1
	for stream.Receive() {
		switch ev := stream.Msg().Event.(type) {
		case *boxdv1.ExecStreamResponse_Stdout:
			out += string(ev.Stdout)
		case *boxdv1.ExecStreamResponse_Stderr:
			errOut += string(ev.Stderr)
		case *boxdv1.ExecStreamResponse_Result:
			code = ev.Result.ExitCode
		}
	}
	if err := stream.Err(); err != nil || out != "a\n" || errOut != "b\n" || code != 0 {
		t.Errorf("gRPC exec stream: %q %q %d %v", out, errOut, code, err)
	}
	_, err = api.GetSandbox(ctx(t), connect.NewRequest(&boxdv1.GetSandboxRequest{Id: "0000deadbeef"}))
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("gRPC unknown id: %v", err)
	}
}

// TestSocketPermissions: the socket is 0660 in a 0750 directory.
func TestSocketPermissions(t *testing.T) {
	for path, want := range map[string]uint32{env.socket: 0o660, strings.TrimSuffix(env.socket, "/boxd.sock"): 0o750} {
		st, err := lstat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st != want {
			t.Errorf("%s mode %o, want %o", path, st, want)
		}
	}
}
