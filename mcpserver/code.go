package mcpserver

import (
	"context"
	"fmt"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

type codeIn struct {
	SandboxID      string  `json:"sandbox_id" jsonschema:"id or name of the sandbox (its image needs python3 with ipykernel, as boxd/debian:bookworm has)"`
	Code           string  `json:"code" jsonschema:"Python code; the value of the last expression is returned, matplotlib figures come back as images"`
	Context        string  `json:"context,omitempty" jsonschema:"interpreter context to run in; variables persist per context; default \"default\""`
	TimeoutSeconds float64 `json:"timeout_seconds,omitempty" jsonschema:"interrupt the code after this many seconds; default 60, at most 3600"`
}

type codeOut struct {
	Stdout      string   `json:"stdout"`
	Stderr      string   `json:"stderr"`
	Value       string   `json:"value,omitempty" jsonschema:"text/plain form of the last expression's value"`
	Displays    []string `json:"displays,omitempty" jsonschema:"text form of each display output; images are in the result's content"`
	Error       string   `json:"error,omitempty" jsonschema:"the exception raised, as NAME: VALUE"`
	Traceback   string   `json:"traceback,omitempty"`
	TimedOut    bool     `json:"timed_out"`
	Interrupted bool     `json:"interrupted"`
	Restarted   bool     `json:"restarted" jsonschema:"the context was restarted: its variables are gone"`
	Truncated   bool     `json:"truncated"`
}

func (s *Server) addCode(srv *mcp.Server) {
	addTool(s, srv, &mcp.Tool{
		Name: "run_code",
		Description: "Run Python code in a sandbox's long-lived interpreter (IPython): variables and imports persist between " +
			"calls in the same context. Returns stdout, stderr, the last expression's value, display outputs (images as image " +
			"content) and the exception raised, if any. The sandbox's image needs python3 with ipykernel (boxd/debian:bookworm).",
	}, s.runCode)
}

func (s *Server) runCode(ctx context.Context, _ *mcp.CallToolRequest, in codeIn) (*mcp.CallToolResult, codeOut, error) {
	if in.SandboxID == "" {
		return nil, codeOut{}, fmt.Errorf("sandbox_id is required")
	}
	timeout := defaultExecTimeout
	if in.TimeoutSeconds < 0 || in.TimeoutSeconds > maxExecTimeout.Seconds() {
		return nil, codeOut{}, fmt.Errorf("timeout_seconds %v: must be between 0 and %v", in.TimeoutSeconds, maxExecTimeout.Seconds())
	} else if in.TimeoutSeconds > 0 {
		timeout = time.Duration(in.TimeoutSeconds * float64(time.Second))
	}
	stream, err := s.code.RunCode(ctx, connect.NewRequest(&boxdv1.RunCodeRequest{SandboxId: in.SandboxID, Code: in.Code,
		Context: in.Context, Timeout: timeout.String(), OutputLimit: defaultOutputLimit}))
	if err != nil {
		return nil, codeOut{}, describe("run code in sandbox "+in.SandboxID, err)
	}
	defer stream.Close()
	var out codeOut
	var stdout, stderr []byte
	var res *boxdv1.CodeResult
	for stream.Receive() {
		switch ev := stream.Msg().Event.(type) {
		case *boxdv1.RunCodeResponse_Stdout:
			stdout = append(stdout, ev.Stdout...)
		case *boxdv1.RunCodeResponse_Stderr:
			stderr = append(stderr, ev.Stderr...)
		case *boxdv1.RunCodeResponse_Result:
			res = ev.Result
		}
	}
	if err := stream.Err(); err != nil {
		return nil, codeOut{}, describe("run code in sandbox "+in.SandboxID, err)
	}
	if res == nil {
		return nil, codeOut{}, fmt.Errorf("run code in sandbox %s: no result", in.SandboxID)
	}
	out.Stdout, out.Stderr = printable(stdout), printable(stderr)
	result := &mcp.CallToolResult{}
	for _, d := range res.Displays {
		out.Displays = append(out.Displays, printable(d.Data["text/plain"]))
		for _, mime := range []string{"image/png", "image/svg+xml"} {
			if b, ok := d.Data[mime]; ok {
				result.Content = append(result.Content, &mcp.ImageContent{Data: b, MIMEType: mime})
			}
		}
	}
	if res.Value != nil {
		out.Value = printable(res.Value.Data["text/plain"])
	}
	if e := res.Error; e != nil {
		out.Error = e.Name + ": " + e.Value
		out.Traceback = strings.Join(e.Traceback, "\n")
	}
	out.TimedOut, out.Interrupted, out.Restarted, out.Truncated = res.TimedOut, res.Interrupted, res.Restarted, res.Truncated
	result.Content = append([]mcp.Content{&mcp.TextContent{Text: codeText(out)}}, result.Content...)
	return result, out, nil
}

// codeText is the result as a model reads it.
func codeText(o codeOut) string {
	var b strings.Builder
	if o.TimedOut {
		b.WriteString("[timed out: the code was interrupted]\n")
	}
	if o.Restarted {
		b.WriteString("[the interpreter was restarted: variables from earlier calls are gone]\n")
	}
	if o.Truncated {
		b.WriteString("[output truncated]\n")
	}
	if o.Stdout != "" {
		fmt.Fprintf(&b, "--- stdout ---\n%s\n", strings.TrimRight(o.Stdout, "\n"))
	}
	if o.Stderr != "" {
		fmt.Fprintf(&b, "--- stderr ---\n%s\n", strings.TrimRight(o.Stderr, "\n"))
	}
	for _, d := range o.Displays {
		fmt.Fprintf(&b, "--- display ---\n%s\n", d)
	}
	if o.Value != "" {
		fmt.Fprintf(&b, "--- value ---\n%s\n", o.Value)
	}
	if o.Error != "" {
		fmt.Fprintf(&b, "--- error ---\n%s\n%s\n", o.Error, o.Traceback)
	}
	if b.Len() == 0 {
		return "(no output)"
	}
	return b.String()
}
