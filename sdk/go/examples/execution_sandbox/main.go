// Command execution_sandbox is an agent's code tool: an ExecutionSandbox
// interface with rich configuration, resource usage and typed errors,
// implemented on boxd's Go SDK (sdk/go/boxd).
//
// The interface's methods map onto one SDK call each: Initialize is
// Client.Create (resources, environment, working directory, labels; no
// network unless asked), ExecuteCommand is Sandbox.Stream (user,
// environment, stdin, timeout that kills the whole tree, separate and
// combined output), the file methods are Sandbox.Files calls,
// GetResourceUsage reads the live cgroup through Sandbox.Refresh, and the
// SDK's errors (errors.Is(err, boxd.ErrNotFound)...) become the
// interface's typed errors.
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

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/sdk/go/boxd"
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
	if errors.Is(err, boxd.ErrNotFound) && strings.Contains(err.Error(), "no such file") {
		return &SandboxError{Code: "FILE_OPERATION_FAILED", Message: "boxd", Details: err.Error()}
	}
	return sandboxError(err)
}

// sandboxError turns the SDK's typed errors into the interface's.
func sandboxError(err error) error {
	if err == nil {
		return nil
	}
	code := "COMMAND_EXECUTION_FAILED"
	for _, c := range []struct {
		is   error
		code string
	}{
		{boxd.ErrNotFound, "SANDBOX_NOT_FOUND"},
		{boxd.ErrAlreadyExists, "SANDBOX_ALREADY_EXISTS"},
		{boxd.ErrResourceExhausted, "RESOURCE_LIMIT_EXCEEDED"},
		{boxd.ErrPermissionDenied, "SECURITY_VIOLATION"},
		{boxd.ErrFailedPrecondition, "SANDBOX_NOT_RUNNING"},
		{boxd.ErrDeadlineExceeded, "TIMEOUT_EXCEEDED"},
	} {
		if errors.Is(err, c.is) {
			code = c.code
		}
	}
	return &SandboxError{Code: code, Message: "boxd", Details: err.Error()}
}

// BoxdSandbox implements ExecutionSandbox on boxd.
type BoxdSandbox struct {
	client  *boxd.Client
	sb      *boxd.Sandbox
	cfg     SandboxConfig
	workdir string
	env     map[string]string
}

func NewBoxdSandbox(c *boxd.Client) *BoxdSandbox { return &BoxdSandbox{client: c} }

func envList(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

func (s *BoxdSandbox) Initialize(ctx context.Context, cfg *SandboxConfig) error {
	o := boxd.Options{
		Image: cfg.Image, CPUs: cfg.Resources.CPULimit, PIDs: int64(cfg.Resources.ProcessLimit),
		Env: envList(cfg.Environment), Workdir: cfg.WorkingDir, Labels: cfg.Labels, TTL: 2 * time.Hour,
	}
	if cfg.Resources.MemoryLimit > 0 {
		o.Memory = fmt.Sprint(cfg.Resources.MemoryLimit)
	}
	sb, err := s.client.Create(ctx, o)
	if err != nil {
		return sandboxError(err)
	}
	s.sb, s.cfg, s.workdir, s.env = sb, *cfg, sb.Info.GetWorkdir(), map[string]string{}
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
	c := boxd.Cmd{Args: append([]string{cmd.Executable}, cmd.Args...), Env: envList(env), Dir: cmd.WorkingDir,
		User: cmd.User, Stdin: []byte(cmd.StdinContent), Timeout: cmp(cmd.Timeout, s.cfg.Timeout)}
	if c.Dir == "" {
		c.Dir = s.workdir
	}
	r := &CommandResult{StartTime: time.Now()}
	// Streamed, so the combined output keeps the order the events came in.
	var stdout, stderr, combined bytes.Buffer
	res, err := s.sb.Stream(ctx, c, io.MultiWriter(&stdout, &combined), io.MultiWriter(&stderr, &combined))
	if err != nil {
		return nil, sandboxError(err)
	}
	r.EndTime = time.Now()
	r.Duration = r.EndTime.Sub(r.StartTime)
	r.ExitCode, r.Signal = res.ExitCode, res.Signal
	r.Success = r.ExitCode == 0 && !res.TimedOut
	if res.TimedOut {
		r.Error = "TIMEOUT_EXCEEDED"
	}
	r.Stdout, r.Stderr, r.Combined = stdout.String(), stderr.String(), combined.String()
	return r, nil
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
	f, err := os.Open(source)
	if err != nil {
		return &SandboxError{Code: "FILE_OPERATION_FAILED", Message: "open host file", Details: err.Error()}
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return &SandboxError{Code: "FILE_OPERATION_FAILED", Message: "stat host file", Details: err.Error()}
	}
	_, err = s.sb.Files().WriteFrom(ctx, s.abs(dest), f, boxd.WriteOptions{Mode: st.Mode().Perm()})
	return fileError(err)
}

func (s *BoxdSandbox) WriteFile(ctx context.Context, p string, content []byte, mode uint32) error {
	_, err := s.sb.Files().WriteFrom(ctx, s.abs(p), bytes.NewReader(content), boxd.WriteOptions{Mode: os.FileMode(mode)})
	return fileError(err)
}

func (s *BoxdSandbox) ReadFile(ctx context.Context, p string) ([]byte, error) {
	data, err := s.sb.Files().Read(ctx, s.abs(p))
	return data, fileError(err)
}

func (s *BoxdSandbox) ListFiles(ctx context.Context, p string) ([]FileInfo, error) {
	entries, err := s.sb.Files().List(ctx, s.abs(p))
	if err != nil {
		return nil, fileError(err)
	}
	var out []FileInfo
	for _, e := range entries {
		out = append(out, FileInfo{Name: e.GetName(), Path: path.Join(s.abs(p), e.GetPath()), Size: e.GetSize(), Mode: e.GetMode(),
			IsDir: e.GetType() == boxdv1.FileType_FILE_TYPE_DIRECTORY, Owner: fmt.Sprint(e.GetUid()), Permissions: fmt.Sprintf("%04o", e.GetMode())})
	}
	return out, nil
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
	if err := s.sb.Refresh(ctx); err != nil {
		return nil, sandboxError(err)
	}
	u := s.sb.Info.GetUsage()
	return &ResourceUsage{Timestamp: time.Now(), CPUTime: time.Duration(u.GetCpuUsec()) * time.Microsecond,
		MemoryUsage: int64(u.GetMemoryBytes()), MemoryPeak: int64(u.GetMemoryPeakBytes()), ProcessCount: int(u.GetPids())}, nil
}

// Cleanup deletes the sandbox, giving its processes boxd's grace period.
func (s *BoxdSandbox) Cleanup() error {
	return sandboxError(s.sb.Delete(context.Background(), 0))
}

func main() {
	ctx := context.Background()
	client, err := boxd.Connect(ctx) // $BOXD_SOCKET, else boxd's default socket
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	sb := NewBoxdSandbox(client)
	err = sb.Initialize(ctx, &SandboxConfig{
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
	fmt.Printf("sandbox %s in %s\n", sb.sb.ID, sb.GetWorkingDirectory())

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
