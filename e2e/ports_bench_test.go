//go:build linux

package e2e

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// benchSize is what one transfer of BenchmarkPublishedPort moves.
const benchSize = 256 << 20

// BenchmarkPublishedPort compares a download of 256 MiB through a port
// published by boxd (host client -> boxd -> init -> sandbox's loopback)
// with the same download over a direct loopback connection, in the same
// run, interleaved. Both servers are busybox httpd (which sends with
// sendfile) serving a file of zeros, one in the sandbox and one on the
// host; the client reads with 1 MiB buffers. It reports MiB/s of both:
//
//	go test ./e2e -run '^$' -bench PublishedPort -benchtime 5x
func BenchmarkPublishedPort(b *testing.B) {
	id := newSandboxB(b, "--publish", "0:8080", "--memory", "1g", "--cpus", "2")
	out, stderr, code := boxctlRun("exec", id, "--", "sh", "-c", fmt.Sprintf("mkdir -p /workspace/www && dd if=/dev/zero of=/workspace/www/big bs=1M count=%d 2>/dev/null", benchSize>>20))
	if code != 0 {
		b.Fatalf("make file: %s %s", out, stderr)
	}
	if _, err := boxctl(nil, "exec", "-d", id, "--", "busybox", "httpd", "-f", "-p", "127.0.0.1:8080", "-h", "/workspace/www"); err != nil {
		b.Fatal(err)
	}
	published := portOf(b, id, 8080)

	dir := b.TempDir()
	f, err := os.Create(filepath.Join(dir, "big"))
	if err != nil {
		b.Fatal(err)
	}
	if err := f.Truncate(benchSize); err != nil {
		b.Fatal(err)
	}
	f.Close()
	direct := fmt.Sprintf("127.0.0.1:%d", freePort(b))
	httpd := exec.Command("busybox", "httpd", "-f", "-p", direct, "-h", dir)
	if err := httpd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { httpd.Process.Kill(); httpd.Wait() })

	// Warm both (page cache, servers up), then measure.
	download(b, direct, true)
	download(b, published, true)
	var tDirect, tPublished time.Duration
	b.SetBytes(benchSize)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tDirect += download(b, direct, false)
		tPublished += download(b, published, false)
	}
	b.StopTimer()
	mib := float64(benchSize>>20) * float64(b.N)
	b.ReportMetric(mib/tDirect.Seconds(), "direct-MiB/s")
	b.ReportMetric(mib/tPublished.Seconds(), "published-MiB/s")
	b.ReportMetric(tPublished.Seconds()/tDirect.Seconds(), "published/direct-time")
}

// download GETs /big from addr and returns how long the body took; with
// retry it waits for the server to come up.
func download(b *testing.B, addr string, retry bool) time.Duration {
	b.Helper()
	buf := make([]byte, 1<<20)
	deadline := time.Now().Add(10 * time.Second)
	for {
		start := time.Now()
		n, err := getRaw(addr, buf)
		if err == nil && n == benchSize {
			return time.Since(start)
		}
		if !retry || time.Now().After(deadline) {
			b.Fatalf("download from %s: %d bytes, %v", addr, n, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// getRaw sends an HTTP/1.0 GET and reads the body, counting its bytes.
func getRaw(addr string, buf []byte) (int64, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET /big HTTP/1.0\r\n\r\n"); err != nil {
		return 0, err
	}
	// The header comes first; skip up to its blank line.
	var hdr []byte
	for !strings.Contains(string(hdr), "\r\n\r\n") {
		n, err := c.Read(buf)
		if err != nil {
			return 0, fmt.Errorf("header: %w", err)
		}
		hdr = append(hdr, buf[:n]...)
	}
	i := strings.Index(string(hdr), "\r\n\r\n")
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

func newSandboxB(b *testing.B, args ...string) string {
	b.Helper()
	out, err := boxctl(nil, append([]string{"create"}, args...)...)
	if err != nil {
		b.Fatalf("create: %v", err)
	}
	id := strings.TrimSpace(out)
	b.Cleanup(func() {
		if _, err := boxctl(nil, "rm", "-f", id); err != nil {
			b.Errorf("cleanup rm %s: %v", id, err)
		}
	})
	return id
}
