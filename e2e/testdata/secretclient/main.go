// secretclient is what TestSecretBroker runs inside a sandbox: an HTTPS
// client that trusts the sandbox's store (SSL_CERT_FILE), and two hostile
// ones against boxd's secret broker.
//
//	secretclient get URL HEADER-TEMPLATE [-extra CA.pem | -only CA.pem] [-host HOST]
//	secretclient slow ADDR N SECONDS
//	secretclient huge URL
package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	if len(os.Args) < 3 {
		fail("usage: secretclient get|slow|huge ...")
	}
	switch os.Args[1] {
	case "get":
		get(os.Args[2], os.Args[3], os.Args[4:])
	case "slow":
		n, _ := strconv.Atoi(os.Args[3])
		secs, _ := strconv.Atoi(os.Args[4])
		slow(os.Args[2], n, time.Duration(secs)*time.Second)
	case "huge":
		huge(os.Args[2])
	default:
		fail("unknown mode " + os.Args[1])
	}
}

func fail(msg string) {
	fmt.Println("ERR " + msg)
	os.Exit(1)
}

func get(url, tmpl string, opts []string) {
	roots, err := x509.SystemCertPool() // SSL_CERT_FILE
	if err != nil {
		fail(err.Error())
	}
	var host string
	for i := 0; i+1 < len(opts); i += 2 {
		switch opts[i] {
		case "-extra", "-only":
			b, err := os.ReadFile(opts[i+1])
			if err != nil {
				fail(err.Error())
			}
			if opts[i] == "-only" {
				roots = x509.NewCertPool()
			}
			roots.AppendCertsFromPEM(b)
		case "-host":
			host = opts[i+1]
		}
	}
	c := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		fail(err.Error())
	}
	req.Header.Set("Authorization", os.ExpandEnv(tmpl))
	if host != "" {
		req.Host = host
	}
	resp, err := c.Do(req)
	if err != nil {
		fail(err.Error())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	fmt.Printf("%d %s\n", resp.StatusCode, strings.TrimSpace(string(b)))
}

// slow opens n connections to addr, each sending a request's first bytes
// and then a byte every second (slowloris), for d; it prints how many the
// server had closed by then.
func slow(addr string, n int, d time.Duration) {
	var closed, opened atomic.Int64
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				closed.Add(1)
				return
			}
			defer c.Close()
			opened.Add(1)
			// On the TLS port nothing is sent: a handshake that never
			// starts. On the other, a request's first line, then a byte a
			// second.
			tlsPort := strings.HasSuffix(addr, ":443")
			if !tlsPort {
				if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: allowed.test\r\n")); err != nil {
					closed.Add(1)
					return
				}
			}
			for time.Now().Before(end) {
				time.Sleep(time.Second)
				_ = c.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
				buf := make([]byte, 1)
				_, err := c.Read(buf)
				if ne, ok := err.(net.Error); err != nil && !(ok && ne.Timeout()) {
					closed.Add(1)
					return
				}
				if tlsPort {
					continue
				}
				if _, err := c.Write([]byte("X")); err != nil {
					closed.Add(1)
					return
				}
			}
		}()
	}
	wg.Wait()
	fmt.Printf("closed=%d opened=%d of %d\n", closed.Load(), opened.Load(), n)
}

// huge sends one request with a 1 MiB header.
func huge(url string) {
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("X-Big", strings.Repeat("a", 1<<20))
	c := &http.Client{Timeout: 20 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		fmt.Println("ERR " + err.Error())
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode)
}
