//go:build linux

package main

// Scenario 8: the exec round trip of `true` from the Python SDK
// (sdk/python) next to boxd's Go client, on the same sandbox, in the same
// rounds. The Python side is one long-lived process (as a Python agent
// would be) that runs one exec per line it reads and answers with a line;
// that pipe round trip (tens of µs) is timed with the SDK's call and errs
// against it.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// pythonBin is the interpreter the SDK is tested with (Debian's, which has
// the grpc and protobuf modules setup.sh installs).
const pythonBin = "/usr/bin/python3"

// sdkDriver connects to one sandbox and, for every line on stdin, runs
// `true` in it and prints "ok" or what went wrong.
const sdkDriver = `import sys
import boxd
sb = boxd.Sandbox.connect(sys.argv[1])
for _ in sys.stdin:
    try:
        r = sb.exec(["true"])
        print("ok" if r.exit_code == 0 else "exit %d" % r.exit_code, flush=True)
    except Exception as e:
        print("error %r" % (e,), flush=True)
`

func scenarioSDK(ctx context.Context, e *env, cfg *config) (*latency, error) {
	sdkDir, err := filepath.Abs("sdk/python")
	if err != nil {
		return nil, err
	}
	if !exists(filepath.Join(sdkDir, "boxd", "__init__.py")) {
		return nil, fmt.Errorf("%s: no Python SDK there (run from the repository's root)", sdkDir)
	}
	sb, err := e.boxd.create(ctx)
	if err != nil {
		return nil, fmt.Errorf("boxd create: %w", err)
	}
	defer e.boxd.remove(context.WithoutCancel(ctx), sb)

	py, err := startSDKDriver(ctx, e, sdkDir, sb)
	if err != nil {
		return nil, err
	}
	defer py.stop()
	l := measure(ctx, "exec `true` from a running client: Go and Python SDK", cfg.warm*3, cfg.apiN, []peer{
		apiExecPeer(e.boxd, sb),
		{name: "Python SDK exec", run: func(context.Context, int) error { return py.call() }},
	})
	if g, p := quantile(l.samples["boxd API exec"], 0.5), quantile(l.samples["Python SDK exec"], 0.5); g > 0 && p > 0 {
		logf("%s: Python SDK median minus Go client median: %s (target: at most 1.50 ms)", l.scenario, ms(p-g))
	}
	return l, ctx.Err()
}

type sdkDriverProc struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func startSDKDriver(ctx context.Context, e *env, sdkDir, sb string) (*sdkDriverProc, error) {
	cmd := exec.CommandContext(ctx, pythonBin, "-c", sdkDriver, sb)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+sdkDir, "BOXD_SOCKET="+e.sock)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", pythonBin, err)
	}
	p := &sdkDriverProc{cmd: cmd, in: in, out: bufio.NewReader(out)}
	// The first call also proves the SDK imports and reaches the sandbox.
	if err := p.call(); err != nil {
		p.stop()
		return nil, fmt.Errorf("python SDK: %w", err)
	}
	return p, nil
}

// call runs one exec in the driver and waits for its answer.
func (p *sdkDriverProc) call() error {
	if _, err := io.WriteString(p.in, "x\n"); err != nil {
		return err
	}
	line, err := p.out.ReadString('\n')
	if err != nil {
		return fmt.Errorf("python SDK driver: %w (its stderr is in the log)", err)
	}
	if line = strings.TrimSpace(line); line != "ok" {
		return fmt.Errorf("python SDK: %s", line)
	}
	return nil
}

// stop closes the driver's stdin, which ends its loop, and waits for it.
func (p *sdkDriverProc) stop() {
	_ = p.in.Close()
	_ = p.cmd.Wait()
}
