//go:build linux

package rpc

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
)

// Connection cap, --max-connections on the socket and, counted apart, on
// each TCP listener (a flood from the network then cannot lock out the
// socket's callers). netutil.LimitListener would stop accepting at the cap:
// the next client then waits in the kernel's backlog with no answer and
// cannot tell a busy boxd from a hung one. Here a connection over the cap
// is accepted and handed to a small second server that answers every call
// on it with resource_exhausted naming --max-connections, in whichever
// protocol the call came (Connect, gRPC, HTTP/1 or HTTP/2), and closes it
// soon after. That server is bounded too: at most refuseMax connections
// are being refused at once; beyond that they are closed unanswered and a
// line is logged (at most once a second).

// refuseMax bounds the connections being answered resource_exhausted.
const refuseMax = 64

// refuseWithin bounds how long a refused connection may stay open. A var
// only so that a test on a loaded machine can give its connections longer.
var refuseWithin = 2 * time.Second

type limitListener struct {
	net.Listener
	max    int
	active atomic.Int64
	log    *slog.Logger

	refused  chan net.Conn // to the refusing server; room for refuseMax, so Accept never waits on it
	refusing atomic.Int64
	lastLog  atomic.Int64 // unix nanos of the last "closed unanswered" line
	dropped  atomic.Int64

	done      chan struct{}
	closeOnce sync.Once
}

func newLimitListener(ln net.Listener, max int, log *slog.Logger) *limitListener {
	return &limitListener{Listener: ln, max: max, log: log, refused: make(chan net.Conn, refuseMax), done: make(chan struct{})}
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.active.Add(1) <= int64(l.max) {
			return &countedConn{Conn: c, n: &l.active}, nil
		}
		l.active.Add(-1)
		l.refuse(c)
	}
}

func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// refuse hands c to the refusing server, or closes it if that is full.
func (l *limitListener) refuse(c net.Conn) {
	if l.refusing.Add(1) <= refuseMax {
		_ = c.SetDeadline(time.Now().Add(refuseWithin))
		select {
		case l.refused <- &countedConn{Conn: c, n: &l.refusing}:
			return
		case <-l.done:
		}
	} else {
		l.refusing.Add(-1)
	}
	_ = c.Close()
	n := l.dropped.Add(1)
	now := time.Now().UnixNano()
	if last := l.lastLog.Load(); now-last > int64(time.Second) && l.lastLog.CompareAndSwap(last, now) {
		l.log.Warn("too many API connections: closing new ones unanswered", "max_connections", l.max, "closed_so_far", n)
	}
}

// refusedListener is the refusing server's side: the connections over the
// cap.
type refusedListener limitListener

func (r *refusedListener) Accept() (net.Conn, error) {
	select {
	case c := <-r.refused:
		return c, nil
	case <-r.done:
		return nil, net.ErrClosed
	}
}

func (r *refusedListener) Close() error   { return nil }
func (r *refusedListener) Addr() net.Addr { return r.Listener.Addr() }

// countedConn gives its slot back once, however often it is closed.
type countedConn struct {
	net.Conn
	n    *atomic.Int64
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.n.Add(-1) })
	return c.Conn.Close()
}

// NetConn is the socket under the count, for what needs the socket itself
// (its buffers, the caller's credentials): the convention of tls.Conn.
func (c *countedConn) NetConn() net.Conn { return c.Conn }

// serveRefusals answers every call on a connection over the cap with
// resource_exhausted until l closes.
func (l *limitListener) serveRefusals(proto *http.Protocols, cfg *tls.Config) {
	ew := connect.NewErrorWriter()
	msg := fmt.Sprintf("boxd is serving its maximum of %d API connections (max-connections); retry when one closes", l.max)
	l.log.Debug("connection cap", "max_connections", l.max)
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Connection", "close")
			_ = ew.Write(w, r, connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("%s", msg)))
		}),
		Protocols:         proto,
		ReadHeaderTimeout: refuseWithin,
		IdleTimeout:       refuseWithin / 4,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(l.log.Handler(), slog.LevelDebug),
	}
	go func() {
		<-l.done
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}()
	var ln net.Listener = (*refusedListener)(l)
	if cfg != nil { // a TLS listener's refusals are answered over TLS too
		ln = remoteListener(RemoteListener{Listener: ln, TLS: cfg})
	}
	_ = srv.Serve(ln)
}
