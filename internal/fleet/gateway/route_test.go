//go:build linux

package gateway

import (
	"bytes"
	"encoding/binary"
	"io"
	"net/http"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

func envelope(b []byte) []byte {
	out := make([]byte, 5, 5+len(b))
	binary.BigEndian.PutUint32(out[1:], uint32(len(b)))
	return append(out, b...)
}

// TestSandboxOf finds the sandbox of unary, streamed, gRPC and JSON
// calls, and hands back the bytes it read so the body is whole again.
func TestSandboxOf(t *testing.T) {
	get, _ := proto.Marshal(&boxdv1.GetSandboxRequest{Id: "sb-get"})
	exec, _ := proto.Marshal(&boxdv1.ProcessInput{Event: &boxdv1.ProcessInput_Start{Start: &boxdv1.ProcessSpec{SandboxId: "sb-exec", Args: []string{"sh"}}}})
	stream, _ := proto.Marshal(&boxdv1.ExecRequest{SandboxId: "sb-stream"})
	js, _ := protojson.Marshal(&boxdv1.ReadFileRequest{SandboxId: "sb-json", Path: "/x"})
	list, _ := proto.Marshal(&boxdv1.ListSandboxesRequest{})
	for _, c := range []struct {
		path, ct string
		body     []byte
		id       string
		code     connect.Code
	}{
		{"/boxd.v1.SandboxService/GetSandbox", "application/proto", get, "sb-get", 0},
		{"/boxd.v1.ProcessService/Exec", "application/connect+proto", append(envelope(exec), envelope([]byte("more"))...), "sb-exec", 0},
		{"/boxd.v1.SandboxService/ExecStream", "application/grpc", envelope(stream), "sb-stream", 0},
		{"/boxd.v1.FileService/ReadFile", "application/connect+json", envelope(js), "sb-json", 0},
		{"/boxd.v1.SandboxService/ListSandboxes", "application/proto", list, "", connect.CodeUnimplemented},
		{"/boxd.v1.SandboxService/NoSuch", "application/proto", get, "", connect.CodeUnimplemented},
		{"/boxd.v1.SandboxService/GetSandbox", "application/proto", []byte{0xff, 0xff}, "", connect.CodeInvalidArgument},
	} {
		r, _ := http.NewRequest("POST", "https://gw"+c.path, bytes.NewReader(c.body))
		r.Header.Set("Content-Type", c.ct)
		first, id, err := sandboxOf(r)
		if c.code != 0 {
			if connect.CodeOf(err) != c.code {
				t.Errorf("%s: %v, want %v", c.path, err, c.code)
			}
			continue
		}
		if err != nil || id != c.id {
			t.Errorf("%s: %q %v, want %q", c.path, id, err, c.id)
			continue
		}
		rest, _ := io.ReadAll(r.Body)
		if !bytes.Equal(append(first, rest...), c.body) {
			t.Errorf("%s: the body read back differs", c.path)
		}
	}
}
