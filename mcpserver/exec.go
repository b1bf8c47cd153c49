package mcpserver

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"connectrpc.com/connect"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

const (
	defaultExecTimeout = 60 * time.Second
	maxExecTimeout     = time.Hour
	defaultOutputLimit = 64 << 10
	maxOutputLimit     = 4 << 20
)

type execIn struct {
	SandboxID      string   `json:"sandbox_id" jsonschema:"id or name of the sandbox"`
	Command        string   `json:"command,omitempty" jsonschema:"shell command line, run with /bin/sh -c; give this or args"`
	Args           []string `json:"args,omitempty" jsonschema:"program and arguments, run without a shell; give this or command"`
	TimeoutSeconds float64  `json:"timeout_seconds,omitempty" jsonschema:"kill the command after this many seconds; default 60, at most 3600"`
	OutputLimit    int64    `json:"output_limit_bytes,omitempty" jsonschema:"bytes of stdout plus stderr kept, the rest is dropped and reported; default 65536, at most 4194304"`
	Workdir        string   `json:"workdir,omitempty" jsonschema:"working directory; default the sandbox's"`
	Env            []string `json:"env,omitempty" jsonschema:"extra environment, as KEY=VALUE"`
	Stdin          string   `json:"stdin,omitempty" jsonschema:"text given to the command on standard input"`
}

type execOut struct {
	ExitCode  int32  `json:"exit_code" jsonschema:"the command's exit status (124 when it timed out)"`
	Signal    string `json:"signal,omitempty" jsonschema:"the signal that ended it, if any"`
	TimedOut  bool   `json:"timed_out" jsonschema:"the command was killed at its timeout"`
	Truncated bool   `json:"truncated" jsonschema:"output beyond output_limit_bytes was dropped"`
	Stdout    string `json:"stdout"`
	Stderr    string `json:"stderr"`
}

func (s *Server) addExec(srv *mcp.Server) {
	addTool(s, srv, &mcp.Tool{
		Name: "exec",
		Description: "Run a command in a sandbox and return its exit code, stdout and stderr. The command is killed at " +
			"its timeout; output beyond the limit is dropped, and the result says so.",
	}, s.exec)
}

func (s *Server) exec(ctx context.Context, _ *mcp.CallToolRequest, in execIn) (*mcp.CallToolResult, execOut, error) {
	args, err := execArgs(in)
	if err != nil {
		return nil, execOut{}, err
	}
	timeout := defaultExecTimeout
	if in.TimeoutSeconds < 0 || in.TimeoutSeconds > maxExecTimeout.Seconds() {
		return nil, execOut{}, fmt.Errorf("timeout_seconds %v: must be between 0 and %v", in.TimeoutSeconds, maxExecTimeout.Seconds())
	} else if in.TimeoutSeconds > 0 {
		timeout = time.Duration(in.TimeoutSeconds * float64(time.Second))
	}
	limit := int64(defaultOutputLimit)
	if in.OutputLimit < 0 || in.OutputLimit > maxOutputLimit {
		return nil, execOut{}, fmt.Errorf("output_limit_bytes %d: must be between 0 and %d", in.OutputLimit, maxOutputLimit)
	} else if in.OutputLimit > 0 {
		limit = in.OutputLimit
	}
	resp, err := s.api.Exec(ctx, connect.NewRequest(&boxdv1.ExecRequest{
		SandboxId: in.SandboxID, Args: args, Env: in.Env, Workdir: in.Workdir,
		Timeout: timeout.String(), Stdin: []byte(in.Stdin), OutputLimit: limit,
	}))
	if err != nil {
		return nil, execOut{}, describe("exec in sandbox "+in.SandboxID, err)
	}
	r := resp.Msg.GetResult()
	out := execOut{
		ExitCode: r.GetExitCode(), Signal: r.GetSignal(), TimedOut: r.GetTimedOut(), Truncated: r.GetTruncated(),
		Stdout: printable(resp.Msg.GetStdout()), Stderr: printable(resp.Msg.GetStderr()),
	}
	if out.TimedOut {
		out.ExitCode = 124 // as timeout(1) reports it, whatever the kill left
	}
	return text(execText(out, timeout, limit)), out, nil
}

// execArgs is the argv: exactly one of command and args.
func execArgs(in execIn) ([]string, error) {
	switch {
	case in.SandboxID == "":
		return nil, fmt.Errorf("sandbox_id is required")
	case in.Command != "" && len(in.Args) > 0:
		return nil, fmt.Errorf("give command or args, not both")
	case in.Command != "":
		return []string{"/bin/sh", "-c", in.Command}, nil
	case len(in.Args) > 0:
		return in.Args, nil
	}
	return nil, fmt.Errorf("command or args is required")
}

// execText is the result as a model reads it: status first, notices in
// brackets, then the streams.
func execText(o execOut, timeout time.Duration, limit int64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "exit code: %d", o.ExitCode)
	if o.Signal != "" {
		fmt.Fprintf(&b, " (killed by %s)", o.Signal)
	}
	b.WriteString("\n")
	if o.TimedOut {
		fmt.Fprintf(&b, "[timed out: killed after %s]\n", timeout)
	}
	if o.Truncated {
		fmt.Fprintf(&b, "[output truncated: only the first %d bytes of stdout and stderr were kept; raise output_limit_bytes or redirect to a file]\n", limit)
	}
	fmt.Fprintf(&b, "--- stdout ---\n%s", o.Stdout)
	if o.Stdout != "" && !strings.HasSuffix(o.Stdout, "\n") {
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "--- stderr ---\n%s", o.Stderr)
	return b.String()
}

// printable is output as text: bytes that are not UTF-8 become U+FFFD, as
// JSON would have them anyway.
func printable(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}
