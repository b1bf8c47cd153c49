// Command task_sandbox is a Docker-style task sandbox (create a container
// per task, run shell commands, write and read files, destroy) on boxd's Go
// SDK, sdk/go/boxd.
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
	"errors"
	"fmt"
	"log"
	"os"
	"path"
	"runtime"
	"strings"
	"time"

	"github.com/boxd-dev/boxd/sdk/go/boxd"
)

// Sandbox is one isolated environment for a task.
type Sandbox struct {
	*boxd.Sandbox
	Workspace string
	ctx       context.Context
}

// CommandResult is what a command gave: its output and exit code.
type CommandResult struct {
	StdOut, StdErr string
	ExitCode       int
}

// CreateSandbox makes a sandbox from image ("" for boxd's default) with
// the task's limits: 2 CPUs (or all there are) and 2 GiB.
func CreateSandbox(ctx context.Context, c *boxd.Client, image string) (*Sandbox, error) {
	const workspace = "/home/agent/work"
	sb, err := c.Create(ctx, boxd.Options{
		Image: image, Workdir: workspace, TTL: 2 * time.Hour,
		CPUs: float64(min(2, runtime.NumCPU())), Memory: "2g",
		Labels: map[string]string{"example": "task_sandbox"},
	})
	if err != nil {
		return nil, fmt.Errorf("create sandbox: %w", err)
	}
	return &Sandbox{Sandbox: sb, Workspace: workspace, ctx: ctx}, nil
}

// RunCommand runs a shell command in the workspace.
func (s *Sandbox) RunCommand(command string) (*CommandResult, error) {
	res, err := s.Exec(s.ctx, "/bin/sh", "-c", command)
	if err != nil {
		return nil, fmt.Errorf("run command: %w", err)
	}
	return &CommandResult{StdOut: res.StdoutString(), StdErr: res.StderrString(), ExitCode: res.ExitCode}, nil
}

// WriteFile writes content to a file in the workspace (parents created).
func (s *Sandbox) WriteFile(p string, content []byte) error {
	return s.Files().Write(s.ctx, path.Join(s.Workspace, p), content)
}

// ReadFile reads a file from the workspace.
func (s *Sandbox) ReadFile(p string) ([]byte, error) {
	return s.Files().Read(s.ctx, path.Join(s.Workspace, p))
}

// DestroySandbox removes the sandbox and everything in it.
func (s *Sandbox) DestroySandbox() error { return s.Close() }

func main() {
	ctx := context.Background()
	client, err := boxd.Connect(ctx) // $BOXD_SOCKET, else boxd's default socket
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	sb, err := CreateSandbox(ctx, client, os.Getenv("BOXD_TEST_IMAGE"))
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
	if _, err := sb.RunCommand("true"); !errors.Is(err, boxd.ErrNotFound) {
		log.Fatalf("the sandbox outlived DestroySandbox: %v", err)
	}
	fmt.Println("task_sandbox OK")
}
