//go:build linux

package main

// Scenario 17: the code interpreter. run_code("1+1") on a warm context,
// from boxd's Go client and from the Python SDK (one long-lived process,
// as in scenario 8), in the same rounds (target: at most 5 ms); and the
// first call of a fresh sandbox of the Debian image, which starts the
// in-sandbox driver and its IPython kernel (each sample a new sandbox,
// created and removed untimed).

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"

	"connectrpc.com/connect"

	"github.com/boxd-dev/boxd/internal/rpcclient"
	"github.com/boxd-dev/boxd/internal/testenv"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
)

const debianImage = "boxd/debian:bookworm"

// codeDriver runs run_code("1+1") in the sandbox argv[1] for every line
// on stdin.
const codeDriver = `import sys
import boxd
sb = boxd.Sandbox.connect(sys.argv[1])
for line in sys.stdin:
    try:
        r = sb.run_code("1+1")
        print("ok" if r.text == "2" else "value %r" % (r.text,), flush=True)
    except Exception as e:
        print("error %r" % (e,), flush=True)
`

func runOnePlusOne(ctx context.Context, c boxdv1connect.CodeServiceClient, id string) error {
	s, err := c.RunCode(ctx, connect.NewRequest(&boxdv1.RunCodeRequest{SandboxId: id, Code: "1+1"}))
	if err != nil {
		return err
	}
	defer s.Close()
	var res *boxdv1.CodeResult
	for s.Receive() {
		if r := s.Msg().GetResult(); r != nil {
			res = r
		}
	}
	if err := s.Err(); err != nil {
		return err
	}
	if res == nil || string(res.GetValue().GetData()["text/plain"]) != "2" {
		return errors.New("run_code(1+1): no value 2")
	}
	return nil
}

func (b boxdAPI) createImage(ctx context.Context, image string) (string, error) {
	r, err := b.c.CreateSandbox(ctx, connect.NewRequest(&boxdv1.CreateSandboxRequest{Image: image, Labels: map[string]string{"boxbench": "1"}}))
	if err != nil {
		return "", err
	}
	return r.Msg.Sandbox.Id, nil
}

func scenarioCode(ctx context.Context, e *env, cfg *config) ([]*latency, error) {
	tarPath, err := testenv.DebianImage()
	if err != nil {
		return nil, err
	}
	logf("importing %s into boxd", debianImage)
	if out, err := e.boxctlCmd(ctx, "image", "import", tarPath, "--name", debianImage).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("boxctl image import %s: %v %s", tarPath, err, out)
	}
	sdkDir, err := filepath.Abs("sdk/python")
	if err != nil {
		return nil, err
	}
	code := rpcclient.NewCode(e.sock)
	sb, err := e.boxd.createImage(ctx, debianImage)
	if err != nil {
		return nil, fmt.Errorf("boxd create: %w", err)
	}
	defer e.boxd.remove(context.WithoutCancel(ctx), sb)
	if err := runOnePlusOne(ctx, code, sb); err != nil { // the kernel starts
		return nil, err
	}
	py, err := startSDKDriver(ctx, "Python", exec.CommandContext(ctx, pythonBin, "-c", codeDriver, sb),
		"PYTHONPATH="+sdkDir, "BOXD_SOCKET="+e.sock)
	if err != nil {
		return nil, err
	}
	defer py.stop()
	warm := measure(ctx, "run_code(\"1+1\") on a warm context", cfg.warm*3, cfg.apiN, []peer{
		{name: "boxd Go client run_code", run: func(c context.Context, _ int) error { return runOnePlusOne(c, code, sb) }},
		{name: "Python SDK run_code", run: func(context.Context, int) error { return py.call("x") }},
	})
	for _, name := range warm.peers {
		if s := warm.samples[name]; len(s) > 0 {
			logf("%s: %s median %s (target: at most 5 ms)", warm.scenario, name, ms(quantile(s, 0.5)))
		}
	}
	out := []*latency{warm}
	if ctx.Err() != nil {
		return out, ctx.Err()
	}
	// The first call: each sample a fresh sandbox, made before it (the
	// previous sample's after) and removed after it, untimed.
	fresh, err := e.boxd.createImage(ctx, debianImage)
	if err != nil {
		return out, fmt.Errorf("boxd create: %w", err)
	}
	first := measure(ctx, "run_code first call on a fresh sandbox (driver and kernel start)", 1, max(cfg.n/4, 3), []peer{{
		name: "boxd Go client run_code",
		run:  func(c context.Context, _ int) error { return runOnePlusOne(c, code, fresh) },
		after: func(c context.Context, _ int) error {
			if err := e.boxd.remove(c, fresh); err != nil {
				return err
			}
			fresh, err = e.boxd.createImage(c, debianImage)
			return err
		},
	}})
	e.boxd.remove(context.WithoutCancel(ctx), fresh)
	return append(out, first), ctx.Err()
}
