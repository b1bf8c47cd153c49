//go:build linux

package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// freePort returns a loopback port nothing listens on now.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startHTTPD serves dir inside the sandbox on 127.0.0.1:port with busybox
// httpd, in the background; index.html says body.
func startHTTPD(t testing.TB, id string, port int, body string) {
	t.Helper()
	dir := fmt.Sprintf("/workspace/www%d", port)
	out, stderr, code := boxctlRun("exec", id, "--", "sh", "-c", fmt.Sprintf("mkdir -p %s && printf '%%s' '%s' > %s/index.html", dir, body, dir))
	if code != 0 {
		t.Fatalf("prepare www: exit %d: %s %s", code, out, stderr)
	}
	if _, err := boxctl(nil, "exec", "-d", id, "--", "busybox", "httpd", "-f", "-p", fmt.Sprintf("127.0.0.1:%d", port), "-h", dir); err != nil {
		t.Fatal(err)
	}
}

var httpClient = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// get fetches http://addr/index.html, retrying for a while: the server in
// the sandbox may still be starting (a port nobody listens on is reset).
func get(t testing.TB, addr string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := httpClient.Get("http://" + addr + "/index.html")
		if err == nil {
			b, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if rerr == nil && resp.StatusCode == 200 {
				return string(b)
			}
			err = fmt.Errorf("status %d, %v", resp.StatusCode, rerr)
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func assertClosed(t testing.TB, addr string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err == nil {
		c.Close()
		t.Errorf("%s still accepts connections", addr)
	}
}

// TestPublishedPortHTTP: an HTTP server inside a sandbox without network
// (loopback only) is reachable from the host through ports published at
// create and with boxctl port, also after boxd is killed with SIGKILL and
// started again; after delete nothing listens.
func TestPublishedPortHTTP(t *testing.T) {
	p := freePort(t)
	out, err := boxctl(nil, "create", "--publish", fmt.Sprintf("127.0.0.1:%d:8080", p))
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(out)
	deleted := false
	t.Cleanup(func() {
		if !deleted {
			boxctl(nil, "rm", "-f", id)
		}
	})
	atCreate := fmt.Sprintf("127.0.0.1:%d", p)
	startHTTPD(t, id, 8080, "hello from 8080")
	if got := get(t, atCreate); got != "hello from 8080" {
		t.Fatalf("GET through the port published at create = %q", got)
	}

	// boxctl port ID PORT: the existing mapping for 8080, a new one for 8081.
	if out, err := boxctl(nil, "port", id, "8080"); err != nil || strings.TrimSpace(out) != atCreate {
		t.Errorf("boxctl port %s 8080 = %q, %v; want %s", id, out, err, atCreate)
	}
	out, err = boxctl(nil, "port", id, "8081")
	if err != nil {
		t.Fatal(err)
	}
	later := strings.TrimSpace(out)
	if h, _, err := net.SplitHostPort(later); err != nil || h != "127.0.0.1" {
		t.Fatalf("boxctl port printed %q, want 127.0.0.1:PORT", out)
	}
	startHTTPD(t, id, 8081, "hello from 8081")
	if got := get(t, later); got != "hello from 8081" {
		t.Fatalf("GET through the port published later = %q", got)
	}
	list, err := boxctl(nil, "port", id)
	if err != nil || !strings.Contains(list, atCreate+" -> 8080/tcp") || !strings.Contains(list, later+" -> 8081/tcp") {
		t.Errorf("boxctl port %s lists %q, %v", id, list, err)
	}
	sb := inspect(t, id)
	if len(sb.Ports) != 2 || sb.Ports[0].HostIp != "127.0.0.1" || sb.Ports[0].HostPort != uint32(p) || sb.Ports[0].Port != 8080 || sb.Ports[0].Protocol != "tcp" {
		t.Errorf("inspect ports = %v", sb.Ports)
	}
	if ls, err := boxctl(nil, "ls", "--json"); err != nil || !strings.Contains(ls, fmt.Sprintf(`"host_port": %d`, p)) || !strings.Contains(ls, `"host_ip": "127.0.0.1"`) {
		t.Errorf("ls --json does not show the published port: %v\n%s", err, ls)
	}

	killDaemon()
	assertClosed(t, atCreate) // the listener was boxd's
	if err := startDaemon(); err != nil {
		t.Fatal(err)
	}
	if got := get(t, atCreate); got != "hello from 8080" {
		t.Errorf("after a boxd restart, GET %s = %q", atCreate, got)
	}
	if got := get(t, later); got != "hello from 8081" {
		t.Errorf("after a boxd restart, GET %s = %q", later, got)
	}

	// Unpublish, then delete: nothing listens any more.
	if _, err := boxctl(nil, "port", "--rm", id, "8081"); err != nil {
		t.Fatal(err)
	}
	assertClosed(t, later)
	if got := get(t, atCreate); got != "hello from 8080" {
		t.Errorf("after unpublishing 8081, GET %s = %q", atCreate, got)
	}
	if _, err := boxctl(nil, "rm", id); err != nil {
		t.Fatal(err)
	}
	deleted = true
	assertClosed(t, atCreate)
}

// TestPublishedPortNotListening: a connection to a published port that
// nothing in the sandbox listens on is reset at once, not left hanging.
func TestPublishedPortNotListening(t *testing.T) {
	id := newSandbox(t, "--publish", "0:9")
	addr := portOf(t, id, 9)
	c, err := net.Dial("tcp", addr)
	if errors.Is(err, syscall.ECONNRESET) {
		return // the reset came before connect returned
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	_, err = c.Read(make([]byte, 1))
	if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read from a published port nothing listens on: %v after %v, want a reset or EOF", err, time.Since(start))
	}
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("read: %v, want connection reset", err)
	}
}

func portOf(t testing.TB, id string, port uint32) string {
	t.Helper()
	resp, err := env.api.GetSandbox(context.Background(), connect.NewRequest(&boxdv1.GetSandboxRequest{Id: id}))
	if err != nil {
		t.Fatalf("inspect %s: %v", id, err)
	}
	for _, p := range resp.Msg.Sandbox.Ports {
		if p.Port == port {
			return net.JoinHostPort(p.HostIp, strconv.Itoa(int(p.HostPort)))
		}
	}
	t.Fatalf("sandbox %s publishes no port %d", id, port)
	return ""
}

// TestPublishBadInput: each mistake gets the right code naming the field,
// and leaves no sandbox and no listener behind.
func TestPublishBadInput(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	inUse := uint32(busy.Addr().(*net.TCPAddr).Port)
	free := uint32(freePort(t))
	before := countSandboxes(t)
	for _, tc := range []struct {
		name     string
		publish  []*boxdv1.PublishedPort
		code     connect.Code
		mentions string
	}{
		{"port zero", []*boxdv1.PublishedPort{{Port: 0}}, connect.CodeInvalidArgument, "publish[0].port"},
		{"port too big", []*boxdv1.PublishedPort{{Port: 70000}}, connect.CodeInvalidArgument, "publish[0].port"},
		{"host port too big", []*boxdv1.PublishedPort{{Port: 80, HostPort: 65536}}, connect.CodeInvalidArgument, "publish[0].host_port"},
		{"not loopback", []*boxdv1.PublishedPort{{Port: 80, HostIp: "0.0.0.0"}}, connect.CodeInvalidArgument, "publish[0].host_ip"},
		{"other address", []*boxdv1.PublishedPort{{Port: 80, HostIp: "192.0.2.1"}}, connect.CodeInvalidArgument, "publish[0].host_ip"},
		{"not an address", []*boxdv1.PublishedPort{{Port: 80, HostIp: "localhost"}}, connect.CodeInvalidArgument, "publish[0].host_ip"},
		{"udp", []*boxdv1.PublishedPort{{Port: 80, Protocol: "udp"}}, connect.CodeInvalidArgument, "publish[0].protocol"},
		{"twice", []*boxdv1.PublishedPort{{Port: 80, HostPort: free}, {Port: 81, HostPort: free}}, connect.CodeInvalidArgument, "publish[1].host_port"},
		{"in use", []*boxdv1.PublishedPort{{Port: 80, HostPort: free}, {Port: 81, HostPort: inUse}}, connect.CodeFailedPrecondition, "publish[1].host_port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := env.api.CreateSandbox(ctx(t), connect.NewRequest(&boxdv1.CreateSandboxRequest{Publish: tc.publish}))
			if connect.CodeOf(err) != tc.code || !strings.Contains(err.Error(), tc.mentions) {
				t.Errorf("got %v, want code %v mentioning %q", err, tc.code, tc.mentions)
			}
			// The port bound before the one in use is released again.
			assertClosed(t, fmt.Sprintf("127.0.0.1:%d", free))
		})
	}
	if after := countSandboxes(t); after != before {
		t.Errorf("bad creates left %d sandboxes", after-before)
	}
	_, stderr, code := boxctlRun("create", "--publish", fmt.Sprintf("%d:80", inUse))
	if code == 0 || !strings.Contains(stderr, "failed_precondition") || !strings.Contains(stderr, "publish[0].host_port") {
		t.Errorf("boxctl create --publish with a port in use: exit %d, %q", code, stderr)
	}

	// The same checks on a running sandbox.
	id := newSandbox(t)
	for _, tc := range []struct {
		port     *boxdv1.PublishedPort
		code     connect.Code
		mentions string
	}{
		{&boxdv1.PublishedPort{Port: 65536}, connect.CodeInvalidArgument, "port"},
		{&boxdv1.PublishedPort{Port: 80, HostIp: "192.0.2.1"}, connect.CodeInvalidArgument, "host_ip"},
		{&boxdv1.PublishedPort{Port: 80, HostPort: inUse}, connect.CodeFailedPrecondition, "host_port"},
	} {
		_, err := env.api.PublishPort(ctx(t), connect.NewRequest(&boxdv1.PublishPortRequest{SandboxId: id, Port: tc.port}))
		if connect.CodeOf(err) != tc.code || !strings.Contains(err.Error(), tc.mentions) {
			t.Errorf("PublishPort %v: got %v, want code %v mentioning %q", tc.port, err, tc.code, tc.mentions)
		}
	}
	if sb := inspect(t, id); len(sb.Ports) != 0 {
		t.Errorf("refused publishes left ports recorded: %v", sb.Ports)
	}
	if _, err := env.api.UnpublishPort(ctx(t), connect.NewRequest(&boxdv1.UnpublishPortRequest{SandboxId: id, Port: 80})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("unpublish of a port never published: %v, want not_found", err)
	}
}

// sockets counts the socket descriptors of process pid.
func sockets(t testing.TB, pid int) int {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(dir + "/" + e.Name()); err == nil && strings.HasPrefix(l, "socket:") {
			n++
		}
	}
	return n
}

// waitSockets waits for pid's socket count to come back to want.
func waitSockets(t testing.TB, what string, pid, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := sockets(t, pid)
		if n <= want {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s: pid %d holds %d sockets, %d before", what, pid, n, want)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPublishedPortNoLeak: a client that vanishes mid-stream, and a
// sandbox server that dies mid-stream, leave no connection behind in boxd
// or in the init.
func TestPublishedPortNoLeak(t *testing.T) {
	id := newSandbox(t, "--publish", "0:8080", "--publish", "0:8082", "--memory", "256m")
	sh(t, id, "mkdir -p /workspace/big && dd if=/dev/zero of=/workspace/big/index.html bs=1M count=64 2>/dev/null")
	if _, err := boxctl(nil, "exec", "-d", id, "--", "busybox", "httpd", "-f", "-p", "127.0.0.1:8080", "-h", "/workspace/big"); err != nil {
		t.Fatal(err)
	}
	web := portOf(t, id, 8080)
	boxdPid := env.daemon.Process.Pid
	initPid := int(inspect(t, id).InitPid)

	// Warm up (the server is up, boxd's client pool is made), then count.
	resp, err := httpClient.Get("http://" + web + "/index.html")
	for i := 0; err != nil && i < 100; i++ {
		time.Sleep(50 * time.Millisecond)
		resp, err = httpClient.Get("http://" + web + "/index.html")
	}
	if err != nil {
		t.Fatal(err)
	}
	io.CopyN(io.Discard, resp.Body, 1<<20)
	resp.Body.Close()
	time.Sleep(200 * time.Millisecond)
	boxdBase, initBase := sockets(t, boxdPid), sockets(t, initPid)

	// A client that reads 1 MiB of a 64 MiB answer and is gone.
	for i := 0; i < 5; i++ {
		c, err := net.Dial("tcp", web)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "GET /index.html HTTP/1.0\r\n\r\n")
		if _, err := io.CopyN(io.Discard, c, 1<<20); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	waitSockets(t, "boxd after clients vanished", boxdPid, boxdBase)
	waitSockets(t, "init after clients vanished", initPid, initBase)

	// A sandbox server that streams and is killed mid-stream: the client
	// sees the end promptly.
	if _, err := boxctl(nil, "exec", "-d", id, "--", "sh", "-c", "nc -l -p 8082 -e yes"); err != nil {
		t.Fatal(err)
	}
	stream := portOf(t, id, 8082)
	var c net.Conn
	var br *bufio.Reader
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err = net.Dial("tcp", stream)
		if err != nil {
			t.Fatal(err)
		}
		br = bufio.NewReader(c)
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if line, err := br.ReadString('\n'); err == nil && line == "y\n" {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("nc in the sandbox never streamed")
		}
		time.Sleep(50 * time.Millisecond)
	}
	sh(t, id, "kill -9 $(pidof yes) $(pidof nc) 2>/dev/null; true")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = io.Copy(io.Discard, br)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("the client did not see the end within 5s of the server's death")
	}
	c.Close()
	waitSockets(t, "boxd after the sandbox's server died", boxdPid, boxdBase)
	waitSockets(t, "init after the sandbox's server died", initPid, initBase)
}

// TestPublishedPortReleasedOnExpiry: a sandbox whose ttl runs out takes its
// published ports with it.
func TestPublishedPortReleasedOnExpiry(t *testing.T) {
	// The ttl leaves room for the check before it on a loaded machine
	// (a create alone took 2 s there).
	out, err := boxctl(nil, "create", "--ttl", "8s", "--publish", "0:8080")
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(out)
	t.Cleanup(func() { boxctl(nil, "rm", "-f", id) })
	addr := portOf(t, id, 8080)
	c, err := net.Dial("tcp", addr)
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("published port not listening before expiry: %v", err)
	}
	if c != nil {
		c.Close()
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, _, code := boxctlRun("inspect", id); code != 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s did not expire", id)
		}
		time.Sleep(100 * time.Millisecond)
	}
	assertClosed(t, addr)
}
