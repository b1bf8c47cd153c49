//go:build linux

package main

// Scenario 7: a download through a port boxd publishes (host client ->
// boxd's listener -> the init -> the sandbox's loopback) next to the same
// download over a direct loopback connection to a server on the host, in
// the same rounds. Both servers are busybox httpd (which sends with
// sendfile) serving a file of zeros; the client reads with 1 MiB buffers,
// as e2e's BenchmarkPublishedPort does. Docker's `run -p` needs its bridge,
// which the bench's dockerd runs without (--bridge=none), so Docker has no
// peer here.

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

func scenarioPorts(ctx context.Context, e *env, cfg *config) (*latency, error) {
	size := int64(cfg.portMiB) << 20
	r, err := e.boxd.c.CreateSandbox(ctx, connect.NewRequest(&boxdv1.CreateSandboxRequest{
		Labels:  map[string]string{"boxbench": "1"},
		Limits:  &boxdv1.Limits{Memory: "1g", Cpus: 2},
		Publish: []*boxdv1.PublishedPort{{Port: 8080}},
	}))
	if err != nil {
		return nil, fmt.Errorf("boxd create with a published port: %w", err)
	}
	sb := r.Msg.Sandbox
	defer e.boxd.remove(context.WithoutCancel(ctx), sb.Id)
	var published string
	for _, p := range sb.Ports {
		if p.Port == 8080 {
			published = net.JoinHostPort(p.HostIp, strconv.Itoa(int(p.HostPort)))
		}
	}
	if published == "" {
		return nil, fmt.Errorf("boxd create: sandbox %s lists no published port 8080 (%v)", sb.Id, sb.Ports)
	}
	if _, err := execOK(ctx, e.boxd, sb.Id, "sh", "-c",
		fmt.Sprintf("mkdir -p /workspace/www && dd if=/dev/zero of=/workspace/www/big bs=1M count=%d 2>/dev/null", cfg.portMiB)); err != nil {
		return nil, fmt.Errorf("file in the sandbox: %w", err)
	}
	// The server runs detached; removing the sandbox ends it.
	if err := run(e.boxctlCmd(ctx, "exec", "-d", sb.Id, "--", "busybox", "httpd", "-f", "-p", "127.0.0.1:8080", "-h", "/workspace/www")); err != nil {
		return nil, fmt.Errorf("httpd in the sandbox: %w", err)
	}

	dir := filepath.Join(e.dir, "ports")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	f, err := os.Create(filepath.Join(dir, "big"))
	if err != nil {
		return nil, err
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	direct, err := freeLoopback()
	if err != nil {
		return nil, err
	}
	httpd := exec.Command("busybox", "httpd", "-f", "-p", direct, "-h", dir)
	httpd.Stderr = os.Stderr
	if err := httpd.Start(); err != nil {
		return nil, fmt.Errorf("httpd on the host: %w", err)
	}
	defer func() { _ = httpd.Process.Kill(); _ = httpd.Wait() }()
	for _, addr := range []string{published, direct} {
		if err := waitDownload(ctx, addr, size); err != nil {
			return nil, err
		}
	}

	get := func(addr string) func(context.Context, int) error {
		buf := make([]byte, 1<<20)
		return func(ctx context.Context, _ int) error {
			n, err := getRaw(ctx, addr, buf)
			if err == nil && n != size {
				err = fmt.Errorf("%s: %d bytes, want %d", addr, n, size)
			}
			return err
		}
	}
	l := measure(ctx, fmt.Sprintf("%d MiB download from a server in the sandbox", cfg.portMiB), 1, cfg.portN, []peer{
		{name: "boxd published port", run: get(published)},
		{name: "direct loopback (host server)", run: get(direct)},
	})
	logThroughput(l, size)
	return l, ctx.Err()
}

// freeLoopback returns a loopback address with a port that was free a
// moment ago.
func freeLoopback() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// waitDownload waits until addr serves the whole file (the servers start
// asynchronously); it also puts the file in the page cache.
func waitDownload(ctx context.Context, addr string, size int64) error {
	buf := make([]byte, 1<<20)
	deadline := time.Now().Add(15 * time.Second)
	for {
		n, err := getRaw(ctx, addr, buf)
		if err == nil && n == size {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("download from %s: %d bytes, %v", addr, n, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// getRaw sends an HTTP/1.0 GET for /big and counts the body's bytes.
func getRaw(ctx context.Context, addr string, buf []byte) (int64, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	} else {
		_ = c.SetDeadline(time.Now().Add(2 * time.Minute))
	}
	if _, err := io.WriteString(c, "GET /big HTTP/1.0\r\n\r\n"); err != nil {
		return 0, err
	}
	var hdr []byte
	for {
		n, err := c.Read(buf)
		hdr = append(hdr, buf[:n]...)
		if i := strings.Index(string(hdr), "\r\n\r\n"); i >= 0 {
			if !strings.HasPrefix(string(hdr), "HTTP/1.0 200") && !strings.HasPrefix(string(hdr), "HTTP/1.1 200") {
				return 0, fmt.Errorf("%s: %q", addr, strings.SplitN(string(hdr), "\r\n", 2)[0])
			}
			got := int64(len(hdr) - i - 4)
			for {
				n, err := c.Read(buf)
				got += int64(n)
				if err == io.EOF {
					return got, nil
				}
				if err != nil {
					return got, err
				}
			}
		}
		if err != nil {
			return 0, fmt.Errorf("%s: header: %w", addr, err)
		}
	}
}
