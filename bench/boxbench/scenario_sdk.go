//go:build linux

package main

// Scenario 8: the exec round trip of `true` from the Python SDK
// (sdk/python) and the TypeScript SDK (sdk/typescript) next to boxd's Go
// client, on the same sandbox, in the same rounds; then a 100 MiB file
// written into and read out of the sandbox through each of them (from and
// into memory). Each SDK side is one long-lived process (as an agent would
// be) that runs one call per line it reads and answers with a line; that
// pipe round trip (tens of µs) is timed with the SDK's call and errs
// against it.

import (
	"bufio"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/boxd-dev/boxd/internal/rpcclient"
	"github.com/boxd-dev/boxd/rpc/apiwire"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
)

// pythonBin is the interpreter the SDK is tested with (Debian's, which has
// the grpc and protobuf modules setup.sh installs).
const pythonBin = "/usr/bin/python3"

// sdkDriver connects to one sandbox and, for every line on stdin, runs
// `true` in it ("x"), writes SIZE random bytes to sdkFile ("w") or reads
// that file into a sink ("r"), and prints "ok" or what went wrong.
const sdkDriver = `import os, sys
import boxd
sb = boxd.Sandbox.connect(sys.argv[1])
data = os.urandom(int(sys.argv[2]))
class Sink:
    def write(self, b):
        pass
for line in sys.stdin:
    try:
        op = line.strip()
        if op == "w":
            sb.files.write(sys.argv[3], data)
            print("ok", flush=True)
        elif op == "r":
            n = sb.files.read_into(sys.argv[3], Sink())
            print("ok" if n == len(data) else "read %d bytes" % n, flush=True)
        else:
            r = sb.exec(["true"])
            print("ok" if r.exit_code == 0 else "exit %d" % r.exit_code, flush=True)
    except Exception as e:
        print("error %r" % (e,), flush=True)
`

// tsDriver is sdkDriver for the TypeScript SDK, run by node next to the
// compiled SDK (dist/src); reads go through readStream, pieces dropped.
const tsDriver = `import { createInterface } from "node:readline";
import { randomBytes } from "node:crypto";
import { Sandbox } from "./dist/src/index.js";
const [id, size, file] = process.argv.slice(2);
const sb = await Sandbox.connect(id);
const data = randomBytes(Number(size));
for await (const line of createInterface({ input: process.stdin })) {
  try {
    const op = line.trim();
    if (op === "w") {
      await sb.files.write(file, data);
      console.log("ok");
    } else if (op === "r") {
      let n = 0;
      for await (const p of sb.files.readStream(file)) n += p.length;
      console.log(n === data.length ? "ok" : "read " + n + " bytes");
    } else {
      const r = await sb.exec(["true"]);
      console.log(r.exitCode === 0 ? "ok" : "exit " + r.exitCode);
    }
  } catch (e) {
    console.log("error " + String(e));
  }
}
`

// sdkFile is where the files part writes, in the sandbox (its disk, not a
// tmpfs: /tmp may be small).
const sdkFile = "/workspace/sdk-bench.bin"

func scenarioSDK(ctx context.Context, e *env, cfg *config) ([]*latency, error) {
	sdkDir, err := filepath.Abs("sdk/python")
	if err != nil {
		return nil, err
	}
	if !exists(filepath.Join(sdkDir, "boxd", "__init__.py")) {
		return nil, fmt.Errorf("%s: no Python SDK there (run from the repository's root)", sdkDir)
	}
	tsSrc, err := filepath.Abs("sdk/typescript")
	if err != nil {
		return nil, err
	}
	tsDir, err := buildTypeScriptSDK(e, tsSrc, "ts-sdk")
	if err != nil {
		return nil, err
	}
	// BENCH_AB_TS: another TypeScript SDK (a base commit's sdk/typescript)
	// measured in the same rounds, for an A/B of an SDK change.
	var tsBaseDir string
	if base := os.Getenv("BENCH_AB_TS"); base != "" {
		if tsBaseDir, err = buildTypeScriptSDK(e, base, "ts-sdk-base"); err != nil {
			return nil, fmt.Errorf("BENCH_AB_TS: %w", err)
		}
	}
	sb, err := e.boxd.create(ctx)
	if err != nil {
		return nil, fmt.Errorf("boxd create: %w", err)
	}
	defer e.boxd.remove(context.WithoutCancel(ctx), sb)

	size := int64(cfg.bigMiB) << 20
	py, err := startSDKDriver(ctx, "Python", exec.CommandContext(ctx, pythonBin, "-c", sdkDriver, sb, strconv.FormatInt(size, 10), sdkFile),
		"PYTHONPATH="+sdkDir, "BOXD_SOCKET="+e.sock)
	if err != nil {
		return nil, err
	}
	defer py.stop()
	ts, err := startSDKDriver(ctx, "TypeScript", exec.CommandContext(ctx, "node", filepath.Join(tsDir, "driver.mjs"), sb, strconv.FormatInt(size, 10), sdkFile),
		"BOXD_SOCKET="+e.sock)
	if err != nil {
		return nil, err
	}
	defer ts.stop()
	var base, pyBase *sdkDriverProc
	if tsBaseDir != "" {
		base, err = startSDKDriver(ctx, "TypeScript (base)", exec.CommandContext(ctx, "node", filepath.Join(tsBaseDir, "driver.mjs"), sb, strconv.FormatInt(size, 10), sdkFile),
			"BOXD_SOCKET="+e.sock)
		if err != nil {
			return nil, err
		}
		defer base.stop()
	}
	// BENCH_AB_PY: another Python SDK (a base commit's sdk/python) measured
	// in the same rounds, for an A/B of a Python SDK change.
	if dir := os.Getenv("BENCH_AB_PY"); dir != "" {
		if dir, err = filepath.Abs(dir); err != nil {
			return nil, err
		}
		if !exists(filepath.Join(dir, "boxd", "__init__.py")) {
			return nil, fmt.Errorf("BENCH_AB_PY: %s is not an sdk/python directory (no boxd/__init__.py)", dir)
		}
		pyBase, err = startSDKDriver(ctx, "Python (base)", exec.CommandContext(ctx, pythonBin, "-c", sdkDriver, sb, strconv.FormatInt(size, 10), sdkFile),
			"PYTHONPATH="+dir, "BOXD_SOCKET="+e.sock)
		if err != nil {
			return nil, err
		}
		defer pyBase.stop()
	}
	// withBase adds the base SDKs' peers, if there are any: op is the
	// driver's operation, what the row's last word.
	withBase := func(peers []peer, what, op string) []peer {
		if pyBase != nil {
			peers = append(peers, peer{name: "Python SDK (base) " + what, run: func(context.Context, int) error { return pyBase.call(op) }})
		}
		if base != nil {
			peers = append(peers, peer{name: "TypeScript SDK (base) " + what, run: func(context.Context, int) error { return base.call(op) }})
		}
		return peers
	}
	l := measure(ctx, "exec `true` from a running client: Go, Python and TypeScript SDK", cfg.warm*3, cfg.apiN, withBase([]peer{
		apiExecPeer(e.boxd, sb),
		{name: "Python SDK exec", run: func(context.Context, int) error { return py.call("x") }},
		{name: "TypeScript SDK exec", run: func(context.Context, int) error { return ts.call("x") }},
	}, "exec", "x"))
	g := quantile(l.samples["boxd API exec"], 0.5)
	for _, name := range []string{"Python SDK exec", "Python SDK (base) exec", "TypeScript SDK exec", "TypeScript SDK (base) exec"} {
		if p := quantile(l.samples[name], 0.5); g > 0 && p > 0 {
			logf("%s: %s median minus Go client median: %s (target: at most 1.50 ms)", l.scenario, strings.TrimSuffix(name, " exec"), ms(p-g))
		}
	}
	out := []*latency{l}
	if ctx.Err() != nil {
		return out, ctx.Err()
	}

	// The same file through each client, from and into memory.
	data := make([]byte, size)
	if _, err := rand.Read(data); err != nil {
		return out, err
	}
	fc := rpcclient.NewFiles(e.sock)
	name := fmt.Sprintf("%d MiB through the SDKs", cfg.bigMiB)
	w := measure(ctx, name+", write", 1, cfg.bigN, withBase([]peer{
		{name: "Go client write", run: func(ctx context.Context, _ int) error { return goWriteBytes(ctx, fc, sb, sdkFile, data) }},
		{name: "Python SDK write", run: func(context.Context, int) error { return py.call("w") }},
		{name: "TypeScript SDK write", run: func(context.Context, int) error { return ts.call("w") }},
	}, "write", "w"))
	logThroughput(w, size)
	out = append(out, w)
	r := measure(ctx, name+", read", 1, cfg.bigN, withBase([]peer{
		{name: "Go client read", run: func(ctx context.Context, _ int) error { return goReadDiscard(ctx, fc, sb, sdkFile, size) }},
		{name: "Python SDK read", run: func(context.Context, int) error { return py.call("r") }},
		{name: "TypeScript SDK read", run: func(context.Context, int) error { return ts.call("r") }},
	}, "read", "r"))
	logThroughput(r, size)
	out = append(out, r)
	return out, ctx.Err()
}

// buildTypeScriptSDK compiles the TypeScript SDK at src (sdk/typescript,
// or a base commit's for BENCH_AB_TS) in the scratch directory name next
// to the node_modules its committed lockfile pins (scripts/npm-modules.sh,
// the cache the tests use) and writes the driver there.
func buildTypeScriptSDK(e *env, src, name string) (string, error) {
	out, err := exec.Command("bash", "scripts/npm-modules.sh", src).Output()
	if err != nil {
		return "", fmt.Errorf("npm packages of the TypeScript SDK: %w", err)
	}
	mods := strings.TrimSpace(string(out))
	dir := filepath.Join(e.dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if b, err := exec.Command("cp", "-r", filepath.Join(src, "package.json"), filepath.Join(src, "tsconfig.json"),
		filepath.Join(src, "src"), dir).CombinedOutput(); err != nil {
		return "", fmt.Errorf("copying the TypeScript SDK: %w: %s", err, b)
	}
	if err := os.Symlink(mods, filepath.Join(dir, "node_modules")); err != nil && !os.IsExist(err) {
		return "", err
	}
	// Only the SDK itself: tests and examples are not needed here.
	tsc := exec.Command("node", filepath.Join(mods, "typescript", "bin", "tsc"), "-p", ".")
	tsc.Dir = dir
	if b, err := tsc.CombinedOutput(); err != nil {
		return "", fmt.Errorf("compiling the TypeScript SDK: %w: %s", err, b)
	}
	return dir, os.WriteFile(filepath.Join(dir, "driver.mjs"), []byte(tsDriver), 0o644)
}

// goWriteBytes writes data to path with FileService WriteFile in the
// chunks boxd's Go client uses, as a Go program holding the bytes would.
func goWriteBytes(ctx context.Context, fc boxdv1connect.FileServiceClient, id, path string, data []byte) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	ws := fc.WriteFile(ctx)
	msg := &boxdv1.WriteFileRequest{SandboxId: id, Path: path}
	for off := 0; ; off += apiwire.ChunkBytes {
		msg.Data = data[off:min(off+apiwire.ChunkBytes, len(data))]
		if err := ws.Send(msg); err != nil {
			break // the reason comes from CloseAndReceive
		}
		msg = &boxdv1.WriteFileRequest{}
		if off+apiwire.ChunkBytes >= len(data) {
			break
		}
	}
	_, err := ws.CloseAndReceive()
	return err
}

// goReadDiscard reads path with FileService ReadFile and drops the data.
func goReadDiscard(ctx context.Context, fc boxdv1connect.FileServiceClient, id, path string, size int64) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	rs, err := fc.ReadFile(ctx, connect.NewRequest(&boxdv1.ReadFileRequest{SandboxId: id, Path: path}))
	if err != nil {
		return err
	}
	defer rs.Close()
	var n int64
	for rs.Receive() {
		n += int64(len(rs.Msg().Data))
		apiwire.RecycleChunk(rs.Msg().Data)
	}
	if err := rs.Err(); err != nil {
		return err
	}
	if n != size {
		return fmt.Errorf("read %d bytes, want %d", n, size)
	}
	return nil
}

type sdkDriverProc struct {
	name string
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Reader
}

func startSDKDriver(ctx context.Context, name string, cmd *exec.Cmd, env ...string) (*sdkDriverProc, error) {
	cmd.Env = append(os.Environ(), env...)
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
		return nil, fmt.Errorf("%s SDK driver %s: %w", name, cmd.Path, err)
	}
	p := &sdkDriverProc{name: name, cmd: cmd, in: in, out: bufio.NewReader(out)}
	// The first call also proves the SDK loads and reaches the sandbox.
	if err := p.call("x"); err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

// call runs one operation in the driver and waits for its answer.
func (p *sdkDriverProc) call(op string) error {
	if _, err := io.WriteString(p.in, op+"\n"); err != nil {
		return err
	}
	line, err := p.out.ReadString('\n')
	if err != nil {
		return fmt.Errorf("%s SDK driver: %w (its stderr is in the log)", p.name, err)
	}
	if line = strings.TrimSpace(line); line != "ok" {
		return fmt.Errorf("%s SDK: %s", p.name, line)
	}
	return nil
}

// stop closes the driver's stdin, which ends its loop, and waits for it.
func (p *sdkDriverProc) stop() {
	_ = p.in.Close()
	_ = p.cmd.Wait()
}
