package boxd

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// These tests drive a real boxd: the one at $BOXD_SOCKET (e2e TestSDKGo
// runs them against its private daemon, with BOXD_TEST_IMAGE its image).
// Without one they fail: a test that cannot find its daemon must not pass.

func connectT(t *testing.T) *Client {
	t.Helper()
	if os.Getenv(SocketEnv) == "" {
		t.Fatalf("%s is unset: these tests need a boxd (e2e TestSDKGo runs them against a private one)", SocketEnv)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func createT(t *testing.T, c *Client, o Options) *Sandbox {
	t.Helper()
	o.Image = os.Getenv("BOXD_TEST_IMAGE")
	if o.Labels == nil {
		o.Labels = map[string]string{}
	}
	o.Labels["test"] = t.Name()
	sb, err := c.Create(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sb.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return sb
}

// TestSandboxLifecycle: create with settings, exec (output, exit code,
// stdin, env, user, combined output, timeout), stream, close; after
// Close the sandbox is gone and a second Close is no error.
func TestSandboxLifecycle(t *testing.T) {
	c := connectT(t)
	ctx := context.Background()
	sb := createT(t, c, Options{
		Memory: "128m", CPUs: 1, PIDs: 64, Env: []string{"GREETING=hi"}, Workdir: "/work",
		Hostname: "sdkbox", TTL: 10 * time.Minute, ExecTimeout: time.Minute,
	})
	if sb.ID == "" || sb.Info.GetMemoryBytes() != 128<<20 || sb.Info.GetWorkdir() != "/work" {
		t.Fatalf("created %+v", sb.Info)
	}
	res, err := sb.Exec(ctx, "sh", "-c", `echo "$GREETING from $(hostname) in $(pwd)"; echo oops >&2; exit 7`)
	if err != nil {
		t.Fatal(err)
	}
	if res.StdoutString() != "hi from sdkbox in /work\n" || res.StderrString() != "oops\n" || res.ExitCode != 7 {
		t.Errorf("exec: %q %q %d", res.Stdout, res.Stderr, res.ExitCode)
	}
	res, err = sb.Run(ctx, Cmd{Args: []string{"sh", "-c", "cat; echo err >&2"}, Stdin: []byte("in\n"), CombinedOutput: true, User: "65534", Env: []string{"A=1"}})
	if err != nil || res.StdoutString() != "in\nerr\n" || res.ExitCode != 0 {
		t.Errorf("run with stdin and combined output: %+v %v", res, err)
	}
	start := time.Now()
	res, err = sb.Run(ctx, Cmd{Args: []string{"sleep", "30"}, Timeout: 500 * time.Millisecond})
	if err != nil || !res.TimedOut || time.Since(start) > 10*time.Second {
		t.Errorf("timeout: %+v %v after %v", res, err, time.Since(start))
	}
	var out, errw bytes.Buffer
	res, err = sb.Stream(ctx, Cmd{Args: []string{"sh", "-c", "for i in 1 2 3; do echo $i; done; echo e >&2; exit 3"}}, &out, &errw)
	if err != nil || out.String() != "1\n2\n3\n" || errw.String() != "e\n" || res.ExitCode != 3 {
		t.Errorf("stream: %q %q %+v %v", out.String(), errw.String(), res, err)
	}
	if got, err := c.Get(ctx, sb.ID); err != nil || got.ID != sb.ID {
		t.Errorf("get: %v %v", got, err)
	}
	if list, err := c.List(ctx, map[string]string{"test": t.Name()}); err != nil || len(list) != 1 || list[0].ID != sb.ID {
		t.Errorf("list by label: %v %v", list, err)
	}
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Exec(ctx, "true"); !errors.Is(err, ErrNotFound) {
		t.Errorf("exec after close: %v, want ErrNotFound", err)
	}
	if err := sb.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
}

// TestFilesLarge: a 9 MiB file (more than one message may carry) goes in
// and comes back out whole, from bytes and from a reader.
func TestFilesLarge(t *testing.T) {
	c := connectT(t)
	ctx := context.Background()
	sb := createT(t, c, Options{})
	data := make([]byte, 9<<20+123)
	for i := range data {
		data[i] = byte(i*7 + i>>13)
	}
	if err := sb.Files().Write(ctx, "/workspace/deep/dir/big.bin", data); err != nil {
		t.Fatal(err)
	}
	got, err := sb.Files().Read(ctx, "/workspace/deep/dir/big.bin")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes (want %d), equal %v: %v", len(got), len(data), bytes.Equal(got, data), err)
	}
	n, err := sb.Files().WriteFrom(ctx, "/workspace/x.txt", strings.NewReader("one\n"), WriteOptions{Mode: 0o600})
	if err != nil || n != 4 {
		t.Fatalf("write from a reader: %d %v", n, err)
	}
	if _, err := sb.Files().WriteFrom(ctx, "/workspace/x.txt", strings.NewReader("two\n"), WriteOptions{Append: true}); err != nil {
		t.Fatal(err)
	}
	info, err := sb.Files().Stat(ctx, "/workspace/x.txt")
	if err != nil || info.GetSize() != 8 || info.GetMode()&0o777 != 0o600 {
		t.Errorf("stat: %v %v", info, err)
	}
	res, err := sb.Exec(ctx, "sh", "-c", "cat /workspace/x.txt; sha256sum /workspace/deep/dir/big.bin | cut -c1-8")
	if err != nil || !strings.HasPrefix(res.StdoutString(), "one\ntwo\n") {
		t.Errorf("the files in the sandbox: %+v %v", res, err)
	}
	entries, err := sb.Files().List(ctx, "/workspace")
	if err != nil || len(entries) != 2 {
		t.Errorf("list: %v %v", entries, err)
	}
	if err := sb.Files().RemoveAll(ctx, "/workspace/deep"); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Files().Read(ctx, "/workspace/deep/dir/big.bin"); !errors.Is(err, ErrNotFound) {
		t.Errorf("read after remove: %v, want ErrNotFound", err)
	}
	if err := sb.Files().Write(ctx, "/workspace/nodir/f", nil); err != nil {
		t.Errorf("an empty file in a new directory: %v", err)
	}
	if _, err := sb.Files().WriteFrom(ctx, "/workspace/none/f", strings.NewReader("x"), WriteOptions{NoParents: true}); !errors.Is(err, ErrNotFound) {
		t.Errorf("NoParents into a missing directory: %v, want ErrNotFound", err)
	}
}

// TestErrors: each failure is the typed error of its code with boxd's
// message, as errors.Is sees it.
func TestErrors(t *testing.T) {
	c := connectT(t)
	ctx := context.Background()
	_, err := c.Get(ctx, "no-such-sandbox")
	var e *Error
	if !errors.Is(err, ErrNotFound) || !errors.As(err, &e) || !strings.Contains(e.Message, "no-such-sandbox") {
		t.Errorf("get of an unknown id: %v, want ErrNotFound naming it", err)
	}
	_, err = c.Create(ctx, Options{Image: os.Getenv("BOXD_TEST_IMAGE"), Memory: "lots"})
	if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "memory") {
		t.Errorf("create with a bad memory: %v, want ErrInvalidArgument naming memory", err)
	}
	sb := createT(t, c, Options{Name: "sdk-dup-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))})
	_, err = c.Create(ctx, Options{Image: os.Getenv("BOXD_TEST_IMAGE"), Name: sb.Name})
	if !errors.Is(err, ErrAlreadyExists) {
		t.Errorf("create with a taken name: %v, want ErrAlreadyExists", err)
	}
	if _, err := sb.Exec(ctx); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("exec of nothing: %v, want ErrInvalidArgument", err)
	}
	if _, err := sb.Run(ctx, Cmd{Args: []string{"cat"}, Stdin: make([]byte, 9<<20)}); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "stdin") {
		t.Errorf("9 MiB of stdin: %v, want ErrInvalidArgument naming stdin", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := sb.Exec(cctx, "true"); !errors.Is(err, context.Canceled) || !errors.Is(err, ErrCanceled) {
		t.Errorf("exec with a canceled context: %v, want context.Canceled and ErrCanceled", err)
	}
	missing := filepath.Join(t.TempDir(), "none.sock")
	_, err = Connect(ctx, WithSocket(missing))
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), missing) {
		t.Errorf("connect to no boxd: %v, want ErrUnavailable naming the socket", err)
	}
}

// TestDiff: the files a command added, changed and deleted, with a patch.
func TestDiff(t *testing.T) {
	c := connectT(t)
	sb := createT(t, c, Options{})
	ctx := context.Background()
	if _, err := sb.Exec(ctx, "sh", "-c", "echo hi > /workspace/new; rm /etc/shadow; chmod 600 /etc/hostname"); err != nil {
		t.Fatal(err)
	}
	ch, err := sb.Diff(ctx, DiffOptions{Patch: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ch.Entries {
		got = append(got, e.Change.String()+" "+e.Path)
	}
	want := "DIFF_CHANGE_MODIFIED /etc/hostname,DIFF_CHANGE_DELETED /etc/shadow,DIFF_CHANGE_ADDED /workspace/new"
	if strings.Join(got, ",") != want || ch.Truncated {
		t.Fatalf("diff: %v (truncated %v), want %s", got, ch.Truncated, want)
	}
	if p := ch.Entries[2].Patch; p != "--- /dev/null\n+++ b/workspace/new\n@@ -0,0 +1,1 @@\n+hi\n" {
		t.Errorf("patch of /workspace/new: %q", p)
	}
	if _, err := sb.Diff(ctx, DiffOptions{Since: SinceFork}); !errors.Is(err, ErrFailedPrecondition) {
		t.Errorf("since fork of a sandbox not forked: %v, want ErrFailedPrecondition", err)
	}
}
