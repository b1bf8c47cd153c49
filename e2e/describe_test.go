//go:build linux

package e2e

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/boxd-dev/boxd/internal/testenv"
)

// grpcurl runs grpcurl (built from the Go module proxy by the harness)
// against the test daemon's socket, with no proto files: everything it
// knows comes from boxd's reflection service.
func grpcurl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin, err := testenv.Grpcurl()
	if err != nil {
		t.Fatalf("grpcurl: %v", err)
	}
	// Flags first; args hold the socket (grpcurl's address, a path with
	// -unix) and the verb or method.
	cmd := exec.Command(bin, append([]string{"-plaintext", "-unix", "-max-time", "20"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if err != nil {
		return stdout.String(), &grpcurlError{err: err, stderr: stderr.String()}
	}
	return stdout.String(), nil
}

type grpcurlError struct {
	err    error
	stderr string
}

func (e *grpcurlError) Error() string { return e.err.Error() + ": " + e.stderr }

// TestGrpcurlReflection: a stock gRPC tool lists, describes, probes and
// calls boxd by reflection alone.
func TestGrpcurlReflection(t *testing.T) {
	out, err := grpcurl(t, env.socket, "list")
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	for _, svc := range []string{"boxd.v1.SandboxService", "boxd.v1.FileService", "boxd.v1.ProcessService", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"} {
		if !strings.Contains(out, svc+"\n") {
			t.Errorf("list lacks %s:\n%s", svc, out)
		}
	}

	out, err = grpcurl(t, env.socket, "describe", "boxd.v1.SandboxService")
	if err != nil {
		t.Fatalf("describe service: %v", err)
	}
	if !strings.Contains(out, "rpc CreateSandbox ( .boxd.v1.CreateSandboxRequest ) returns ( .boxd.v1.CreateSandboxResponse )") {
		t.Errorf("describe boxd.v1.SandboxService lacks CreateSandbox:\n%s", out)
	}
	out, err = grpcurl(t, env.socket, "describe", "boxd.v1.ExecRequest")
	if err != nil {
		t.Fatalf("describe message: %v", err)
	}
	if !strings.Contains(out, "message ExecRequest {") || !strings.Contains(out, "sandbox_id") {
		t.Errorf("describe boxd.v1.ExecRequest:\n%s", out)
	}

	// The standard health probe: the server as a whole and each service.
	for _, svc := range []string{"", "boxd.v1.SandboxService", "boxd.v1.FileService", "boxd.v1.ProcessService"} {
		out, err = grpcurl(t, "-d", `{"service":"`+svc+`"}`, env.socket, "grpc.health.v1.Health/Check")
		if err != nil || !strings.Contains(oneSpaced(out), `"status": "SERVING"`) {
			t.Errorf("health of %q: %s %v", svc, out, err)
		}
	}
	out, err = grpcurl(t, "-d", `{"service":"no.such.Service"}`, env.socket, "grpc.health.v1.Health/Check")
	if err == nil || !strings.Contains(err.Error(), "NotFound") {
		t.Errorf("health of an unknown service: %s %v, want NotFound", out, err)
	}

	// A real call whose request grpcurl builds from the reflected schema.
	id := newSandbox(t)
	out, err = grpcurl(t, "-d", `{"sandbox_id":"`+id+`","args":["echo","hello from grpcurl"]}`, env.socket, "boxd.v1.SandboxService/Exec")
	if err != nil {
		t.Fatalf("exec through grpcurl: %v", err)
	}
	if !strings.Contains(oneSpaced(out), `"stdout": "aGVsbG8gZnJvbSBncnBjdXJsCg=="`) { // base64 of the echo
		t.Errorf("exec through grpcurl: %s", out)
	}
}

// oneSpaced collapses every run of white space to one space: grpcurl
// prints through protojson, which varies its spacing from build to build
// on purpose.
func oneSpaced(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
