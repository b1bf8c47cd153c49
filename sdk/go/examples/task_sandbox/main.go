// Command task_sandbox is a Docker-style task sandbox (create a container
// per task, run shell commands, write and read files, destroy) on boxd's Go
// client, rpc/client.
//
// A Docker version typically bind-mounts a host temp directory as the
// workspace and copies files with tar; here the workspace lives in the
// sandbox and files move through boxd's file API, so no host path is ever
// shared with the sandbox.
//
// Run: BOXD_SOCKET=/run/boxd/boxd.sock go run ./sdk/go/examples/task_sandbox
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"path"
	"runtime"
	"strings"

	"connectrpc.com/connect"

	"github.com/boxd-dev/boxd/internal/rpcclient"

	"github.com/boxd-dev/boxd/rpc/apiwire"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
)

// Sandbox is one isolated environment for a task.
type Sandbox struct {
	ID        string
	Workspace string
	api       boxdv1connect.SandboxServiceClient
	files     boxdv1connect.FileServiceClient
	ctx       context.Context
}

// CommandResult is what a command gave: its output and exit code.
type CommandResult struct {
	StdOut, StdErr string
	ExitCode       int
}

// CreateSandbox makes a sandbox from image ("" for boxd's default) with
// The task's limits: 2 CPUs (or all there are) and 2 GiB.
func CreateSandbox(ctx context.Context, image string) (*Sandbox, error) {
	socket := os.Getenv("BOXD_SOCKET")
	if socket == "" {
		socket = apiwire.DefaultSocket
	}
	api := rpcclient.New(socket)
	const workspace = "/home/agent/work"
	res, err := api.CreateSandbox(ctx, connect.NewRequest(&boxdv1.CreateSandboxRequest{
		Image: image, Workdir: workspace, Ttl: "2h",
		Limits: &boxdv1.Limits{Cpus: float64(min(2, runtime.NumCPU())), Memory: "2g"},
		Labels: map[string]string{"example": "task_sandbox"},
	}))
	if err != nil {
		return nil, fmt.Errorf("create sandbox: %w", err)
	}
	return &Sandbox{ID: res.Msg.Sandbox.Id, Workspace: workspace, api: api, files: rpcclient.NewFiles(socket), ctx: ctx}, nil
}

// RunCommand runs a shell command in the workspace.
func (s *Sandbox) RunCommand(command string) (*CommandResult, error) {
	res, err := s.api.Exec(s.ctx, connect.NewRequest(&boxdv1.ExecRequest{SandboxId: s.ID, Args: []string{"/bin/sh", "-c", command}}))
	if err != nil {
		return nil, fmt.Errorf("run command: %w", err)
	}
	return &CommandResult{StdOut: string(res.Msg.Stdout), StdErr: string(res.Msg.Stderr), ExitCode: int(res.Msg.Result.ExitCode)}, nil
}

// WriteFile writes content to a file in the workspace (parents created).
func (s *Sandbox) WriteFile(p string, content []byte) error {
	stream := s.files.WriteFile(s.ctx)
	if err := stream.Send(&boxdv1.WriteFileRequest{SandboxId: s.ID, Path: path.Join(s.Workspace, p), Parents: true, Data: content}); err != nil && err != io.EOF {
		return err
	}
	_, err := stream.CloseAndReceive()
	return err
}

// ReadFile reads a file from the workspace.
func (s *Sandbox) ReadFile(p string) ([]byte, error) {
	stream, err := s.files.ReadFile(s.ctx, connect.NewRequest(&boxdv1.ReadFileRequest{SandboxId: s.ID, Path: path.Join(s.Workspace, p)}))
	if err != nil {
		return nil, err
	}
	defer stream.Close()
	var out []byte
	for stream.Receive() {
		out = append(out, stream.Msg().Data...)
	}
	return out, stream.Err()
}

// DestroySandbox removes the sandbox and everything in it.
func (s *Sandbox) DestroySandbox() error {
	_, err := s.api.DeleteSandbox(s.ctx, connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: s.ID}))
	return err
}

func main() {
	ctx := context.Background()
	sb, err := CreateSandbox(ctx, os.Getenv("BOXD_TEST_IMAGE"))
	if err != nil {
		log.Fatal(err)
	}
	defer sb.DestroySandbox()
	fmt.Printf("sandbox %s created\n", sb.ID)

	if err := sb.WriteFile("src/hello.sh", []byte("echo \"hello from $(pwd)\"; echo oops >&2; exit 7\n")); err != nil {
		log.Fatal(err)
	}
	res, err := sb.RunCommand("sh src/hello.sh")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("exit %d stdout %q stderr %q\n", res.ExitCode, res.StdOut, res.StdErr)
	if res.ExitCode != 7 || res.StdOut != "hello from /home/agent/work\n" || res.StdErr != "oops\n" {
		log.Fatalf("unexpected result %+v", res)
	}
	if _, err := sb.RunCommand("echo generated > out.txt"); err != nil {
		log.Fatal(err)
	}
	out, err := sb.ReadFile("out.txt")
	if err != nil || strings.TrimSpace(string(out)) != "generated" {
		log.Fatalf("read back: %q %v", out, err)
	}
	fmt.Printf("read back %q\n", out)
	if err := sb.DestroySandbox(); err != nil {
		log.Fatal(err)
	}
	if _, err := sb.RunCommand("true"); connect.CodeOf(err) != connect.CodeNotFound {
		log.Fatalf("the sandbox outlived DestroySandbox: %v", err)
	}
	fmt.Println("task_sandbox OK")
}
