//go:build linux

package rpc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func post(sock string) (int, string, error) {
	c, err := net.Dial("unix", sock)
	if err != nil {
		return 0, "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "POST /x HTTP/1.1\r\nHost: boxd\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, "", err
	}
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// Over the cap a connection is answered resource_exhausted; past
// refuseMax such connections it is closed unanswered at once; the server
// keeps serving throughout.
func TestLimitListener(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	raw, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	// The refused connections below must all still be open when the last
	// is accepted, however slowly a loaded machine accepts 70 of them.
	defer func(d time.Duration) { refuseWithin = d }(refuseWithin)
	refuseWithin = 30 * time.Second
	ll := newLimitListener(raw, 1, slog.New(slog.DiscardHandler))
	proto := new(http.Protocols)
	proto.SetHTTP1(true)
	proto.SetUnencryptedHTTP2(true)
	go ll.serveRefusals(proto, nil)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })}
	go srv.Serve(ll)
	t.Cleanup(func() { srv.Close() })

	if code, body, err := post(sock); code != 200 || body != "ok" {
		t.Fatalf("under the cap: %d %q %v", code, body, err)
	}
	for ll.active.Load() != 0 { // the server has seen that connection close
		time.Sleep(10 * time.Millisecond)
	}
	held, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	code, body, err := post(sock)
	if code != http.StatusTooManyRequests || !strings.Contains(body, `"code":"resource_exhausted"`) || !strings.Contains(body, "max-connections") {
		t.Errorf("over the cap: %d %s %v", code, body, err)
	}

	// Silent connections over the cap: refuseMax wait for their request
	// (until refuseWithin), the rest are closed at once. The refused call
	// above must have given its slot back first, or one of the silent ones
	// is dropped in its place (seen on a loaded machine: 63 and 7).
	for wait := time.Now().Add(10 * time.Second); ll.refusing.Load() != 0; {
		if time.Now().After(wait) {
			t.Fatalf("the refused call still holds its slot after 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	var silent []net.Conn
	for range refuseMax + 6 {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		silent = append(silent, c)
	}
	for wait := time.Now().Add(20 * time.Second); ll.refusing.Load() < refuseMax || ll.dropped.Load() < 6; { // all accepted
		if time.Now().After(wait) {
			t.Fatalf("after 20 s: %d connections being refused, %d dropped; want %d and 6", ll.refusing.Load(), ll.dropped.Load(), refuseMax)
		}
		time.Sleep(10 * time.Millisecond)
	}
	var closedAtOnce atomic.Int32
	var wg sync.WaitGroup
	for _, c := range silent {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond)) // well before refuseWithin
			var ne net.Error
			if _, err := c.Read(make([]byte, 1)); err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
				closedAtOnce.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := closedAtOnce.Load(); n != 6 {
		t.Errorf("%d of %d silent connections over the cap closed at once, want 6 (refuseMax %d answered)", n, len(silent), refuseMax)
	}
	for _, c := range silent {
		c.Close()
	}
	held.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, body, err := post(sock)
		if code == 200 && body == "ok" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server does not serve after the connections closed: %d %s %v", code, body, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
