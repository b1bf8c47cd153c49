// Command execution_sandbox is an agent's code tool: an ExecutionSandbox
// interface with rich configuration, resource usage and typed errors,
// implemented on boxd's Go client, rpc/client.
//
// The interface's methods map onto one or two API calls each: Initialize
// is CreateSandbox (resources, environment, working directory, labels;
// no network unless asked), ExecuteCommand is ProcessService.Exec (user,
// environment, stdin, timeout that kills the whole tree, separate and
// combined output), the file methods are FileService calls,
// GetResourceUsage reads the live cgroup through GetSandbox, and API codes
// become the interface's typed errors.
//
// Run: BOXD_SOCKET=/run/boxd/boxd.sock go run ./sdk/go/examples/execution_sandbox
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/boxd-dev/boxd/internal/rpcclient"

	"github.com/boxd-dev/boxd/rpc/apiwire"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
)

// The parts of the interface's types this example fills in.
type (
	SandboxConfig struct {
		Image       string
		Resources   ResourceLimits
		Environment map[string]string
		WorkingDir  string
		Timeout     time.Duration // default per command
		Labels      map[string]string
	}
	ResourceLimits struct {
		CPULimit     float64
		MemoryLimit  int64
		ProcessLimit int
	}
	Command struct {
		Executable   string
		Args         []string
		WorkingDir   string
		Environment  map[string]string
		StdinContent string
		Timeout      time.Duration
		User         string
	}
	CommandResult struct {
		ExitCode                 int
		Success                  bool
		Stdout, Stderr, Combined string
		StartTime, EndTime       time.Time
		Duration                 time.Duration
		Signal, Error            string
	}
	FileInfo struct {
		Name, Path  string
		Size        int64
		Mode        uint32
		IsDir       bool
		Owner       string
		Permissions string
	}
	ResourceUsage struct {
		Timestamp    time.Time
		CPUTime      time.Duration
		MemoryUsage  int64
		MemoryPeak   int64
		ProcessCount int
	}
	SandboxError struct{ Code, Message, Details string }
)

func (e *SandboxError) Error() string { return e.Code + ": " + e.Message + ": " + e.Details }

// fileError is the interface's error for a file operation: a missing file is a
// failed file operation, not a missing sandbox.
func fileError(err error) error {
	if connect.CodeOf(err) == connect.CodeNotFound && strings.Contains(err.Error(), "no such file") {
		return &SandboxError{Code: "FILE_OPERATION_FAILED", Message: "boxd", Details: err.Error()}
	}
	return sandboxError(err)
}

// sandboxError turns an API error into the interface's typed error.
func sandboxError(err error) error {
	if err == nil {
		return nil
	}
	code := "COMMAND_EXECUTION_FAILED"
	switch connect.CodeOf(err) {
	case connect.CodeNotFound:
		code = "SANDBOX_NOT_FOUND"
	case connect.CodeAlreadyExists:
		code = "SANDBOX_ALREADY_EXISTS"
	case connect.CodeResourceExhausted:
		code = "RESOURCE_LIMIT_EXCEEDED"
	case connect.CodePermissionDenied:
		code = "SECURITY_VIOLATION"
	case connect.CodeFailedPrecondition:
		code = "SANDBOX_NOT_RUNNING"
	case connect.CodeDeadlineExceeded:
		code = "TIMEOUT_EXCEEDED"
	}
	return &SandboxError{Code: code, Message: "boxd", Details: err.Error()}
}

// BoxdSandbox implements ExecutionSandbox on boxd.
type BoxdSandbox struct {
	id      string
	cfg     SandboxConfig
	workdir string
	env     map[string]string
	api     boxdv1connect.SandboxServiceClient
	proc    boxdv1connect.ProcessServiceClient
	files   boxdv1connect.FileServiceClient
}

func NewBoxdSandbox(socket string) *BoxdSandbox {
	return &BoxdSandbox{api: rpcclient.New(socket), proc: rpcclient.NewProcess(socket), files: rpcclient.NewFiles(socket)}
}

func envList(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

func (s *BoxdSandbox) Initialize(ctx context.Context, cfg *SandboxConfig) error {
	limits := &boxdv1.Limits{Cpus: cfg.Resources.CPULimit, Pids: int64(cfg.Resources.ProcessLimit)}
	if cfg.Resources.MemoryLimit > 0 {
		limits.Memory = fmt.Sprint(cfg.Resources.MemoryLimit)
	}
	res, err := s.api.CreateSandbox(ctx, connect.NewRequest(&boxdv1.CreateSandboxRequest{
		Image: cfg.Image, Limits: limits, Env: envList(cfg.Environment), Workdir: cfg.WorkingDir, Labels: cfg.Labels, Ttl: "2h",
	}))
	if err != nil {
		return sandboxError(err)
	}
	s.id, s.cfg, s.workdir, s.env = res.Msg.Sandbox.Id, *cfg, res.Msg.Sandbox.Workdir, map[string]string{}
	return nil
}

func (s *BoxdSandbox) ExecuteCommand(ctx context.Context, cmd *Command) (*CommandResult, error) {
	env := map[string]string{}
	for k, v := range s.env {
		env[k] = v
	}
	for k, v := range cmd.Environment {
		env[k] = v
	}
	spec := &boxdv1.ProcessSpec{SandboxId: s.id, Args: append([]string{cmd.Executable}, cmd.Args...), Env: envList(env),
		Workdir: cmd.WorkingDir, User: cmd.User, Stdin: []byte(cmd.StdinContent)}
	if spec.Workdir == "" {
		spec.Workdir = s.workdir
	}
	if t := cmp(cmd.Timeout, s.cfg.Timeout); t > 0 {
		spec.Timeout = t.String()
	}
	r := &CommandResult{StartTime: time.Now()}
	stream := s.proc.Exec(ctx)
	defer stream.CloseResponse()
	if err := stream.Send(&boxdv1.ProcessInput{Event: &boxdv1.ProcessInput_Start{Start: spec}}); err != nil && !errors.Is(err, io.EOF) {
		return nil, sandboxError(err)
	}
	if err := stream.Send(&boxdv1.ProcessInput{Event: &boxdv1.ProcessInput_CloseStdin{CloseStdin: true}}); err != nil && !errors.Is(err, io.EOF) {
		return nil, sandboxError(err)
	}
	var stdout, stderr, combined bytes.Buffer
	for {
		out, err := stream.Receive()
		if err != nil {
			return nil, sandboxError(err)
		}
		switch ev := out.Event.(type) {
		case *boxdv1.ProcessOutput_Stdout:
			stdout.Write(ev.Stdout)
			combined.Write(ev.Stdout)
		case *boxdv1.ProcessOutput_Stderr:
			stderr.Write(ev.Stderr)
			combined.Write(ev.Stderr)
		case *boxdv1.ProcessOutput_Result:
			r.EndTime = time.Now()
			r.Duration = r.EndTime.Sub(r.StartTime)
			r.ExitCode, r.Signal = int(ev.Result.ExitCode), ev.Result.Signal
			r.Success = r.ExitCode == 0 && !ev.Result.TimedOut
			if ev.Result.TimedOut {
				r.Error = "TIMEOUT_EXCEEDED"
			}
			r.Stdout, r.Stderr, r.Combined = stdout.String(), stderr.String(), combined.String()
			return r, nil
		}
	}
}

func cmp(a, b time.Duration) time.Duration {
	if a > 0 {
		return a
	}
	return b
}

func (s *BoxdSandbox) abs(p string) string {
	if path.IsAbs(p) {
		return p
	}
	return path.Join(s.workdir, p)
}

// CopyFiles copies a host file into the sandbox.
func (s *BoxdSandbox) CopyFiles(ctx context.Context, source, dest string) error {
	data, err := os.ReadFile(source)
	if err != nil {
		return &SandboxError{Code: "FILE_OPERATION_FAILED", Message: "read host file", Details: err.Error()}
	}
	st, _ := os.Stat(source)
	return s.WriteFile(ctx, dest, data, uint32(st.Mode().Perm()))
}

func (s *BoxdSandbox) WriteFile(ctx context.Context, p string, content []byte, mode uint32) error {
	stream := s.files.WriteFile(ctx)
	m := &boxdv1.WriteFileRequest{SandboxId: s.id, Path: s.abs(p), Parents: true, Data: content}
	if mode != 0 {
		m.Mode = &mode
	}
	if err := stream.Send(m); err != nil && !errors.Is(err, io.EOF) {
		return fileError(err)
	}
	_, err := stream.CloseAndReceive()
	return fileError(err)
}

func (s *BoxdSandbox) ReadFile(ctx context.Context, p string) ([]byte, error) {
	stream, err := s.files.ReadFile(ctx, connect.NewRequest(&boxdv1.ReadFileRequest{SandboxId: s.id, Path: s.abs(p)}))
	if err != nil {
		return nil, fileError(err)
	}
	defer stream.Close()
	var out []byte
	for stream.Receive() {
		out = append(out, stream.Msg().Data...)
	}
	return out, fileError(stream.Err())
}

func (s *BoxdSandbox) ListFiles(ctx context.Context, p string) ([]FileInfo, error) {
	stream, err := s.files.ListDir(ctx, connect.NewRequest(&boxdv1.ListDirRequest{SandboxId: s.id, Path: s.abs(p)}))
	if err != nil {
		return nil, fileError(err)
	}
	defer stream.Close()
	var out []FileInfo
	for stream.Receive() {
		for _, e := range stream.Msg().Entries {
			out = append(out, FileInfo{Name: e.Name, Path: path.Join(s.abs(p), e.Path), Size: e.Size, Mode: e.Mode,
				IsDir: e.Type == boxdv1.FileType_FILE_TYPE_DIRECTORY, Owner: fmt.Sprint(e.Uid), Permissions: fmt.Sprintf("%04o", e.Mode)})
		}
	}
	return out, fileError(stream.Err())
}

// The working directory and environment are defaults for later commands.
func (s *BoxdSandbox) GetWorkingDirectory() string { return s.workdir }
func (s *BoxdSandbox) SetWorkingDirectory(p string) error {
	s.workdir = s.abs(p)
	return nil
}
func (s *BoxdSandbox) GetEnvironment() map[string]string { return s.env }
func (s *BoxdSandbox) SetEnvironment(env map[string]string) error {
	for k, v := range env {
		s.env[k] = v
	}
	return nil
}

func (s *BoxdSandbox) GetResourceUsage(ctx context.Context) (*ResourceUsage, error) {
	res, err := s.api.GetSandbox(ctx, connect.NewRequest(&boxdv1.GetSandboxRequest{Id: s.id}))
	if err != nil {
		return nil, sandboxError(err)
	}
	u := res.Msg.Sandbox.Usage
	return &ResourceUsage{Timestamp: time.Now(), CPUTime: time.Duration(u.GetCpuUsec()) * time.Microsecond,
		MemoryUsage: int64(u.GetMemoryBytes()), MemoryPeak: int64(u.GetMemoryPeakBytes()), ProcessCount: int(u.GetPids())}, nil
}

func (s *BoxdSandbox) Cleanup() error {
	_, err := s.api.DeleteSandbox(context.Background(), connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: s.id}))
	return sandboxError(err)
}

func main() {
	ctx := context.Background()
	socket := os.Getenv("BOXD_SOCKET")
	if socket == "" {
		socket = apiwire.DefaultSocket
	}
	sb := NewBoxdSandbox(socket)
	err := sb.Initialize(ctx, &SandboxConfig{
		Image: os.Getenv("BOXD_TEST_IMAGE"), Resources: ResourceLimits{CPULimit: 1, MemoryLimit: 256 << 20, ProcessLimit: 128},
		Environment: map[string]string{"STAGE": "test"}, WorkingDir: "/repo", Timeout: 30 * time.Second,
		Labels: map[string]string{"example": "execution_sandbox"},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Cleanup()
	check := func(ok bool, format string, args ...any) {
		if !ok {
			sb.Cleanup()
			log.Fatalf(format, args...)
		}
	}
	must := func(err error) {
		check(err == nil, "%v", err)
	}
	fmt.Printf("sandbox %s in %s\n", sb.id, sb.GetWorkingDirectory())

	must(sb.WriteFile(ctx, "src/main.sh", []byte("read name; echo \"hi $name ($STAGE, $EXTRA)\"; echo warn >&2; exit 4\n"), 0o755))
	must(sb.SetEnvironment(map[string]string{"EXTRA": "set later"}))
	r, err := sb.ExecuteCommand(ctx, &Command{Executable: "sh", Args: []string{"src/main.sh"}, StdinContent: "boxd\n"})
	must(err)
	fmt.Printf("exit %d stdout %q stderr %q combined %q in %v\n", r.ExitCode, r.Stdout, r.Stderr, r.Combined, r.Duration.Round(time.Millisecond))
	check(r.ExitCode == 4 && !r.Success && r.Stdout == "hi boxd (test, set later)\n" && r.Stderr == "warn\n" && (r.Combined == "hi boxd (test, set later)\nwarn\n" || r.Combined == "warn\nhi boxd (test, set later)\n"), "result %+v", r) // two pipes: either may arrive first

	r, err = sb.ExecuteCommand(ctx, &Command{Executable: "id", Args: []string{"-u"}, User: "65534"})
	must(err)
	check(strings.TrimSpace(r.Stdout) == "65534", "as user: %+v", r)

	r, err = sb.ExecuteCommand(ctx, &Command{Executable: "sleep", Args: []string{"30"}, Timeout: time.Second})
	must(err)
	fmt.Printf("timeout: exit %d error %s\n", r.ExitCode, r.Error)
	check(r.ExitCode == 124 && r.Error == "TIMEOUT_EXCEEDED", "timeout: %+v", r)

	files, err := sb.ListFiles(ctx, "src")
	must(err)
	check(len(files) == 1 && files[0].Name == "main.sh" && files[0].Permissions == "0755", "list: %+v", files)
	must(sb.SetWorkingDirectory("src"))
	r, err = sb.ExecuteCommand(ctx, &Command{Executable: "pwd"})
	must(err)
	check(r.Stdout == "/repo/src\n", "pwd: %q", r.Stdout)
	data, err := sb.ReadFile(ctx, "/repo/src/main.sh")
	must(err)
	check(strings.HasPrefix(string(data), "read name"), "read: %q", data)

	u, err := sb.GetResourceUsage(ctx)
	must(err)
	fmt.Printf("usage: memory %d bytes, peak %d, cpu %v, pids %d\n", u.MemoryUsage, u.MemoryPeak, u.CPUTime, u.ProcessCount)
	check(u.MemoryPeak > 0 && u.ProcessCount >= 1, "usage: %+v", u)

	_, err = sb.ReadFile(ctx, "/no/such/file")
	var se *SandboxError
	check(errors.As(err, &se) && se.Code == "FILE_OPERATION_FAILED", "typed error: %v", err)
	must(sb.Cleanup())
	_, err = sb.GetResourceUsage(ctx)
	check(errors.As(err, &se) && se.Code == "SANDBOX_NOT_FOUND", "after cleanup: %v", err)
	fmt.Println("execution_sandbox OK")
}
