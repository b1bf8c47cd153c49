package main

import (
	"bytes"
	"fmt"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"

	"connectrpc.com/connect"
	"github.com/urfave/cli/v2"

	"github.com/boxd-dev/boxd/internal/rpcclient"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// runCodeCommand is `boxctl run-code`: code in a sandbox's long-lived
// Python interpreter (CodeService.RunCode).
func runCodeCommand() *cli.Command {
	return &cli.Command{
		Name:      "run-code",
		Usage:     "run Python code in a sandbox's interpreter, whose state persists between calls",
		ArgsUsage: "ID [CODE... | -]",
		Description: "The code is CODE (the arguments joined by spaces), the file of -f, or standard input (\"-\" or nothing).\n" +
			"Output streams as it comes; then the last expression's value and every display output, as text.\n" +
			"Images are summarized (\"[image/png 640x480, 18322 bytes]\") unless --save-dir writes them to files.\n" +
			"Exit status: 0, 1 if the code raised (the traceback goes to stderr), 124 if it timed out, 125 if boxd refused.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "context", Aliases: []string{"c"}, Usage: "the interpreter context to run in (default \"default\")"},
			&cli.StringFlag{Name: "file", Aliases: []string{"f"}, Usage: "read the code from `FILE`"},
			&cli.StringFlag{Name: "timeout", Usage: "interrupt the code after this long (Go duration)"},
			&cli.Int64Flag{Name: "output-limit", Usage: "bytes of output kept (0: the sandbox's default)"},
			&cli.StringFlag{Name: "save-dir", Usage: "write images and HTML to `DIR` (display-N.png, .svg, .html)"},
			&cli.BoolFlag{Name: "json", Usage: "print the result as JSON (data base64) after the streamed output"},
		},
		Action: runCode,
	}
}

func runCodeSource(c *cli.Context) (string, error) {
	args := c.Args().Tail()
	var b []byte
	var err error
	switch {
	case c.String("file") != "":
		if len(args) > 0 {
			return "", fmt.Errorf("give the code as -f FILE or as arguments, not both")
		}
		b, err = os.ReadFile(c.String("file"))
	case len(args) == 0 || (len(args) == 1 && args[0] == "-"):
		b, err = io.ReadAll(io.LimitReader(os.Stdin, 1<<20+1))
	default:
		return strings.Join(args, " "), nil
	}
	if err != nil {
		return "", fmt.Errorf("read the code: %w", err)
	}
	return string(b), nil
}

func runCode(c *cli.Context) error {
	if c.NArg() < 1 {
		return fmt.Errorf("usage: boxctl run-code ID [--context NAME] [-f FILE | - | CODE...]")
	}
	code, err := runCodeSource(c)
	if err != nil {
		return err
	}
	stream, err := rpcclient.NewCode(c.String("socket")).RunCode(c.Context, connect.NewRequest(&boxdv1.RunCodeRequest{
		SandboxId: c.Args().First(), Code: code, Context: c.String("context"),
		Timeout: c.String("timeout"), OutputLimit: c.Int64("output-limit")}))
	if err != nil {
		return boxdErr{err}
	}
	defer stream.Close()
	var res *boxdv1.CodeResult
	for stream.Receive() {
		switch ev := stream.Msg().Event.(type) {
		case *boxdv1.RunCodeResponse_Stdout:
			os.Stdout.Write(ev.Stdout)
		case *boxdv1.RunCodeResponse_Stderr:
			os.Stderr.Write(ev.Stderr)
		case *boxdv1.RunCodeResponse_Result:
			res = ev.Result
		}
	}
	if err := stream.Err(); err != nil {
		return boxdErr{err}
	}
	if res == nil {
		return boxdErr{fmt.Errorf("run-code: the stream ended without a result")}
	}
	if c.Bool("json") {
		return printJSONArray([]*boxdv1.CodeResult{res})
	}
	return printCodeResult(res, c.String("save-dir"))
}

// printCodeResult prints the displays, then the value, then the error.
func printCodeResult(res *boxdv1.CodeResult, dir string) error {
	n := 0
	for _, d := range append(res.Displays, res.Value) {
		if d == nil {
			continue
		}
		n++
		if err := printOutput(d.Data, dir, n); err != nil {
			return err
		}
	}
	if res.Truncated {
		fmt.Fprintln(os.Stderr, "boxctl: output over the limit was dropped")
	}
	if res.Restarted {
		fmt.Fprintln(os.Stderr, "boxctl: the context was restarted: its state is gone")
	}
	if e := res.Error; e != nil {
		for _, l := range e.Traceback {
			fmt.Fprintln(os.Stderr, l)
		}
		if len(e.Traceback) == 0 {
			fmt.Fprintf(os.Stderr, "%s: %s\n", e.Name, e.Value)
		}
	}
	switch {
	case res.TimedOut:
		return exitError{124}
	case res.Error != nil:
		return exitError{1}
	}
	return nil
}

// printOutput prints a bundle as text: an image summarized (or saved as
// dir/display-N.png or .svg), else HTML saved as dir/display-N.html if
// dir is set, else its text/plain, markdown or JSON form.
func printOutput(data map[string][]byte, dir string, n int) error {
	for _, mime := range []string{"image/png", "image/svg+xml", "text/html"} {
		b, ok := data[mime]
		if !ok {
			continue
		}
		if dir != "" {
			p := filepath.Join(dir, fmt.Sprintf("display-%d%s", n, codeExt[mime]))
			if err := os.WriteFile(p, b, 0o644); err != nil {
				return fmt.Errorf("save %s: %w", mime, err)
			}
			fmt.Printf("[%s, %d bytes: %s]\n", mime, len(b), p)
			return nil
		}
		if mime != "text/html" {
			fmt.Println(summarize(mime, b))
			return nil
		}
	}
	for _, mime := range []string{"text/plain", "text/markdown", "application/json", "text/html"} {
		if b, ok := data[mime]; ok {
			fmt.Println(strings.TrimRight(string(b), "\n"))
			return nil
		}
	}
	return nil
}

var codeExt = map[string]string{"image/png": ".png", "image/svg+xml": ".svg", "text/html": ".html"}

func summarize(mime string, b []byte) string {
	if mime == "image/png" {
		if cfg, err := png.DecodeConfig(bytes.NewReader(b)); err == nil {
			return fmt.Sprintf("[image/png %dx%d, %d bytes]", cfg.Width, cfg.Height, len(b))
		}
	}
	return fmt.Sprintf("[%s, %d bytes]", mime, len(b))
}
