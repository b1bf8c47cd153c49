//go:build linux

package insandbox

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/errdefs"

	"github.com/boxd-dev/boxd/agent/wire"
)

// run executes args and returns stdout, stderr and the result.
func run(t *testing.T, tg *target, req wire.ExecRequest, stdin io.Reader) (string, string, wire.ExecResult) {
	t.Helper()
	var out, errb bytes.Buffer
	res, err := tg.client.Exec(testCtx(t), req, stdin, &out, &errb)
	if err != nil {
		t.Fatalf("Exec(%q): %v", req.Args, err)
	}
	return out.String(), errb.String(), res
}

func TestPing(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		if err := tg.client.Ping(testCtx(t)); err != nil {
			t.Fatal(err)
		}
	})
}

func TestExecStdoutStderrApart(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		before := time.Now()
		out, errs, res := run(t, tg, wire.ExecRequest{Args: []string{"sh", "-c", "echo out; echo err >&2; echo out2"}}, nil)
		if out != "out\nout2\n" || errs != "err\n" {
			t.Fatalf("stdout %q stderr %q", out, errs)
		}
		if res.ExitCode != 0 || res.Signal != "" || res.TimedOut || res.Truncated {
			t.Fatalf("result %+v", res)
		}
		if res.Started.Before(before.Add(-time.Second)) || res.Ended.Before(res.Started) {
			t.Fatalf("times %v .. %v", res.Started, res.Ended)
		}
		if res.MaxRSS <= 0 {
			t.Fatalf("MaxRSS %d", res.MaxRSS)
		}
	})
}

func TestExecExitCodes(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		noExec := filepath.Join(tg.workdir, "noexec.sh")
		if err := os.WriteFile(noExec, []byte("#!/bin/sh\necho hi\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		binDir := filepath.Join(tg.workdir, "bin")
		os.Mkdir(binDir, 0o755)
		os.WriteFile(filepath.Join(binDir, "only-readable"), []byte("x"), 0o644)
		tests := []struct {
			name   string
			req    wire.ExecRequest
			code   int
			stderr string
		}{
			{"zero", wire.ExecRequest{Args: []string{"true"}}, 0, ""},
			{"three", wire.ExecRequest{Args: []string{"sh", "-c", "exit 3"}}, 3, ""},
			{"missing command", wire.ExecRequest{Args: []string{"no-such-command-boxd"}}, wire.ExitNotFound,
				`boxd: exec "no-such-command-boxd": executable file not found in $PATH`},
			{"missing path", wire.ExecRequest{Args: []string{"/no/such/file"}}, wire.ExitNotFound, "no such file or directory"},
			{"not executable", wire.ExecRequest{Args: []string{noExec}}, wire.ExitNotExec, "permission denied"},
			{"relative not executable", wire.ExecRequest{Args: []string{"./noexec.sh"}}, wire.ExitNotExec, "permission denied"},
			{"directory", wire.ExecRequest{Args: []string{binDir}}, wire.ExitNotExec, "permission denied"},
			{"not executable in PATH", wire.ExecRequest{Args: []string{"only-readable"}, Env: []string{"PATH=" + binDir}}, wire.ExitNotExec, "permission denied"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				_, errs, res := run(t, tg, tt.req, nil)
				if res.ExitCode != tt.code {
					t.Fatalf("exit %d, want %d (stderr %q)", res.ExitCode, tt.code, errs)
				}
				if !strings.Contains(errs, tt.stderr) {
					t.Fatalf("stderr %q, want it to contain %q", errs, tt.stderr)
				}
			})
		}
	})
}

func TestExecSignalDeath(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		_, _, res := run(t, tg, wire.ExecRequest{Args: []string{"sh", "-c", "kill -9 $$"}}, nil)
		if res.ExitCode != 137 || res.Signal != "SIGKILL" || res.TimedOut {
			t.Fatalf("result %+v", res)
		}
	})
}

func TestExecTimeoutKillsTree(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		start := time.Now()
		out, _, res := run(t, tg, wire.ExecRequest{
			Args:    []string{"sh", "-c", "sleep 100 & echo $!; sleep 100"},
			Timeout: 300 * time.Millisecond,
		}, nil)
		if elapsed := time.Since(start); elapsed > 2*time.Second {
			t.Fatalf("timeout took %v", elapsed)
		}
		if res.ExitCode != wire.ExitTimeout || !res.TimedOut {
			t.Fatalf("result %+v", res)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(out))
		if err != nil {
			t.Fatalf("background pid %q: %v", out, err)
		}
		waitGone(t, pid)
	})
}

func TestExecBackgroundChildDoesNotHang(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		start := time.Now()
		out, _, res := run(t, tg, wire.ExecRequest{Args: []string{"sh", "-c", "sleep 3 & echo hi"}}, nil)
		if elapsed := time.Since(start); elapsed > time.Second {
			t.Fatalf("exec held open by background child for %v", elapsed)
		}
		if out != "hi\n" || res.ExitCode != 0 {
			t.Fatalf("out %q result %+v", out, res)
		}
	})
}

func TestExecEnvAndDir(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		script := []string{"sh", "-c", `echo "$FOO $BASE $NEW"; pwd`}
		out, _, _ := run(t, tg, wire.ExecRequest{Args: script}, nil)
		if want := "old 1 \n" + tg.workdir + "\n"; out != want {
			t.Fatalf("default: %q, want %q", out, want)
		}
		sub := filepath.Join(tg.workdir, "sub")
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, dir := range []string{sub, "sub"} {
			out, _, _ = run(t, tg, wire.ExecRequest{Args: script, Env: []string{"FOO=new", "NEW=x"}, Dir: dir}, nil)
			if want := "new 1 x\n" + sub + "\n"; out != want {
				t.Fatalf("dir %q: %q, want %q", dir, out, want)
			}
		}
		// The base env is per server, not changed by a previous exec.
		out, _, _ = run(t, tg, wire.ExecRequest{Args: []string{"sh", "-c", "echo $FOO; env | grep -c ^BOXD_ || true"}}, nil)
		if out != "old\n0\n" {
			t.Fatalf("env leaked between execs or BOXD_ vars visible: %q", out)
		}
	})
}

func TestExecErrors(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		ctx := testCtx(t)
		_, err := tg.client.Exec(ctx, wire.ExecRequest{}, nil, nil, nil)
		if !errdefs.IsInvalidArgument(err) {
			t.Errorf("empty args: %v", err)
		}
		_, err = tg.client.Exec(ctx, wire.ExecRequest{Args: []string{"true"}, Dir: "/no/such/dir"}, nil, nil, nil)
		if !errdefs.IsNotFound(err) || !strings.Contains(err.Error(), "no such directory") {
			t.Errorf("missing dir: %v", err)
		}
		_, err = tg.client.Exec(ctx, wire.ExecRequest{Args: []string{"echo", "a\x00b"}}, nil, nil, nil)
		if !errdefs.IsInvalidArgument(err) {
			t.Errorf("NUL arg: %v", err)
		}
	})
}

func TestExecStdin(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		t.Run("bytes", func(t *testing.T) {
			out, _, res := run(t, tg, wire.ExecRequest{Args: []string{"cat"}, Stdin: []byte("hello\n")}, nil)
			if out != "hello\n" || res.ExitCode != 0 {
				t.Fatalf("%q %+v", out, res)
			}
		})
		t.Run("no stdin is EOF", func(t *testing.T) {
			out, _, _ := run(t, tg, wire.ExecRequest{Args: []string{"cat"}}, nil)
			if out != "" {
				t.Fatalf("%q", out)
			}
		})
		t.Run("streamed", func(t *testing.T) {
			pr, pw := io.Pipe()
			go func() {
				for i := range 3 {
					io.WriteString(pw, "line "+strconv.Itoa(i)+"\n")
					time.Sleep(10 * time.Millisecond)
				}
				pw.Close()
			}()
			out, _, res := run(t, tg, wire.ExecRequest{Args: []string{"cat"}, Stdin: []byte("first\n")}, pr)
			if out != "first\nline 0\nline 1\nline 2\n" || res.ExitCode != 0 {
				t.Fatalf("%q %+v", out, res)
			}
		})
		t.Run("interactive", func(t *testing.T) {
			// Output must flow while stdin is still open.
			pr, pw := io.Pipe()
			outR, outW := io.Pipe()
			done := make(chan error, 1)
			go func() {
				_, err := tg.client.Exec(testCtx(t), wire.ExecRequest{Args: []string{"cat"}}, pr, outW, nil)
				outW.Close()
				done <- err
			}()
			br := bufio.NewReader(outR)
			for _, line := range []string{"ping\n", "pong\n"} {
				io.WriteString(pw, line)
				got, err := br.ReadString('\n')
				if err != nil || got != line {
					t.Fatalf("echo %q: %q, %v", line, got, err)
				}
			}
			pw.Close()
			io.Copy(io.Discard, br)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
		t.Run("large", func(t *testing.T) {
			data := bytes.Repeat([]byte("0123456789abcdef"), 300<<10/16) // beyond inline size
			want := sha256.Sum256(data)
			out, _, res := run(t, tg, wire.ExecRequest{Args: []string{"sha256sum"}, Stdin: data}, nil)
			if !strings.HasPrefix(out, hexString(want[:])) || res.ExitCode != 0 {
				t.Fatalf("%q %+v", out, res)
			}
		})
		t.Run("command ignores stdin", func(t *testing.T) {
			data := make([]byte, 4<<20) // far more than a pipe buffer
			start := time.Now()
			_, _, res := run(t, tg, wire.ExecRequest{Args: []string{"true"}}, bytes.NewReader(data))
			if res.ExitCode != 0 || time.Since(start) > 5*time.Second {
				t.Fatalf("%+v after %v", res, time.Since(start))
			}
		})
	})
}

func hexString(b []byte) string {
	const digits = "0123456789abcdef"
	var sb strings.Builder
	for _, c := range b {
		sb.WriteByte(digits[c>>4])
		sb.WriteByte(digits[c&15])
	}
	return sb.String()
}

// countingWriter counts bytes and keeps none, so a test can check that the
// output limit holds without holding the output.
type countingWriter struct {
	mu sync.Mutex
	n  int64
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.n += int64(len(p))
	w.mu.Unlock()
	return len(p), nil
}

func TestExecOutputLimit(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		var out, errs countingWriter
		res, err := tg.client.Exec(testCtx(t), wire.ExecRequest{
			// The pause lets the stderr pump forward its 5000 bytes before
			// stdout floods the shared cap, even on a loaded machine.
			Args:        []string{"sh", "-c", "head -c 5000 /dev/zero >&2; sleep 0.2; head -c 50000000 /dev/zero; echo done"},
			OutputLimit: 100000,
		}, nil, &out, &errs)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Truncated || res.ExitCode != 0 {
			t.Fatalf("result %+v", res)
		}
		if errs.n != 5000 || out.n+errs.n != 100000 {
			t.Fatalf("got stdout %d stderr %d bytes, want 100000 in total", out.n, errs.n)
		}
		// Within the limit nothing is truncated.
		_, _, res = run(t, tg, wire.ExecRequest{Args: []string{"echo", "ok"}, OutputLimit: 3}, nil)
		if res.Truncated {
			t.Fatalf("3 bytes truncated at limit 3: %+v", res)
		}
	})
}

// pidWriter cancels the exec once the command has printed its pids.
type pidWriter struct {
	buf    bytes.Buffer
	lines  int
	cancel context.CancelFunc
	pids   chan []int
}

func (w *pidWriter) Write(p []byte) (int, error) {
	w.buf.Write(p)
	if bytes.Count(w.buf.Bytes(), []byte("\n")) >= w.lines {
		var pids []int
		for _, f := range strings.Fields(w.buf.String()) {
			n, _ := strconv.Atoi(f)
			pids = append(pids, n)
		}
		w.pids <- pids
		w.cancel()
	}
	return len(p), nil
}

func TestExecClientDisconnectKillsTree(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		for _, withStdin := range []bool{false, true} {
			ctx, cancel := context.WithCancel(testCtx(t))
			w := &pidWriter{lines: 2, cancel: cancel, pids: make(chan []int, 1)}
			var stdin io.Reader
			if withStdin {
				// Stdin the command never reads: the init must notice the
				// hang-up even while its stdin writer is blocked.
				stdin = io.MultiReader(bytes.NewReader(make([]byte, 1<<20)), blockingReader{ctx})
			}
			_, err := tg.client.Exec(ctx, wire.ExecRequest{
				Args: []string{"sh", "-c", "sleep 100 & echo $!; echo $$; sleep 100"},
			}, stdin, w, nil)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("stdin %v: err %v, want context.Canceled", withStdin, err)
			}
			for _, pid := range <-w.pids {
				waitGone(t, pid)
			}
		}
	})
}

// blockingReader blocks until ctx is done, like a terminal nobody types into.
type blockingReader struct{ ctx context.Context }

func (r blockingReader) Read([]byte) (int, error) {
	<-r.ctx.Done()
	return 0, r.ctx.Err()
}

func TestExecConcurrent(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Go(func() {
				var out bytes.Buffer
				res, err := tg.client.Exec(testCtx(t), wire.ExecRequest{Args: []string{"sh", "-c", "echo " + strconv.Itoa(i) + "; exit " + strconv.Itoa(i%5)}}, nil, &out, nil)
				if err != nil || res.ExitCode != i%5 || out.String() != strconv.Itoa(i)+"\n" {
					t.Errorf("exec %d: %v %+v %q", i, err, res, out.String())
				}
			})
		}
		wg.Wait()
	})
}

func BenchmarkExecTrue(b *testing.B) {
	b.Run("server", func(b *testing.B) { benchExecTrue(b, startServer(b)) })
	b.Run("init", func(b *testing.B) { benchExecTrue(b, startInit(b)) })
}

func benchExecTrue(b *testing.B, tg *target) {
	ctx := context.Background()
	req := wire.ExecRequest{Args: []string{"/bin/true"}}
	b.ReportAllocs()
	var life, inInit time.Duration
	for b.Loop() {
		res, err := tg.client.Exec(ctx, req, nil, nil, nil)
		if err != nil || res.ExitCode != 0 {
			b.Fatal(err, res)
		}
		life += res.Lifetime
		inInit += res.Ended.Sub(res.Started)
	}
	// The process's own life (fork to reaping) and the init's start to
	// reaping, per call: the rest of ns/op is the channel and the reply.
	b.ReportMetric(float64(life.Microseconds())/float64(b.N), "process-µs/op")
	b.ReportMetric(float64(inInit.Microseconds())/float64(b.N), "init-µs/op")
}

func BenchmarkPing(b *testing.B) {
	tg := startServer(b)
	ctx := context.Background()
	for b.Loop() {
		if err := tg.client.Ping(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkForkExecTrue is the floor under BenchmarkExecTrue: the bare
// fork+exec+wait of /bin/true, no agent involved.
func BenchmarkForkExecTrue(b *testing.B) {
	for b.Loop() {
		pid, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{Sys: &syscall.SysProcAttr{Setsid: true}})
		if err != nil {
			b.Fatal(err)
		}
		var ws syscall.WaitStatus
		syscall.Wait4(pid, &ws, 0, nil)
	}
}

// TestExecLifetime: the result carries the command's process lifetime as
// the init measured it, fork to reaping: at least as long as the command
// ran, no longer than the exec as the init timed it.
func TestExecLifetime(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		_, _, res := run(t, tg, wire.ExecRequest{Args: []string{"sleep", "0.2"}}, nil)
		if res.ExitCode != 0 {
			t.Fatalf("result %+v", res)
		}
		if res.Lifetime < 200*time.Millisecond || res.Lifetime > res.Ended.Sub(res.Started) {
			t.Fatalf("lifetime %v, exec ran %v: want 200ms <= lifetime <= exec", res.Lifetime, res.Ended.Sub(res.Started))
		}
		_, _, res = run(t, tg, wire.ExecRequest{Args: []string{"true"}}, nil)
		if res.Lifetime <= 0 || res.Lifetime > res.Ended.Sub(res.Started) {
			t.Fatalf("lifetime of true %v, exec ran %v", res.Lifetime, res.Ended.Sub(res.Started))
		}
	})
}
