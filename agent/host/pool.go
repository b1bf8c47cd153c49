package host

import (
	"errors"
	"net"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Pool keeps a few connections to one init open between calls, for the ops
// that may keep theirs (wire.Keepable: ping, an exec without stdin): the
// next such call skips the dial, and the init's accept and new goroutine.
// A connection goes back only after its op ended well with nothing unread
// and its context never fired; before reuse it must have nothing to read
// (a hostile or dead init that wrote or closed meanwhile loses it), and it
// is reused for at most MaxIdleAge, far below the init's wire.KeepIdle.
// One Pool per sandbox; Close drops them all (delete, init restart).
type Pool struct {
	mu     sync.Mutex
	idle   []*conn // most recently used last
	closed bool
}

const (
	// MaxIdle bounds the idle connections a pool keeps: the init holds a
	// goroutine and a descriptor for each.
	MaxIdle = 4
	// MaxIdleAge is how long an idle connection may be reused.
	MaxIdleAge = 10 * time.Second
)

// NewPool returns an empty pool.
func NewPool() *Pool { return &Pool{} }

// get returns a live idle connection, or nil.
func (p *Pool) get() *conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.idle) > 0 {
		cn := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if time.Since(cn.idleSince) <= MaxIdleAge && quiet(cn.c) {
			return cn
		}
		cn.c.Close()
	}
	return nil
}

// put keeps cn for reuse; false means the caller must close it.
func (p *Pool) put(cn *conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	// The oldest go first when full; they are also the likeliest to be
	// past MaxIdleAge.
	if len(p.idle) >= MaxIdle {
		p.idle[0].c.Close()
		p.idle = append(p.idle[:0], p.idle[1:]...)
	}
	cn.idleSince = time.Now()
	p.idle = append(p.idle, cn)
	return true
}

// Idle is how many connections the pool holds.
func (p *Pool) Idle() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

// Close closes every idle connection; connections returned later are
// closed instead of kept.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, cn := range p.idle {
		cn.c.Close()
	}
	p.idle = nil
}

// quiet reports whether c has nothing to read and is not closed by its
// peer: a peek that would block. Anything else (data the init sent after
// its last frame, end of stream, an error) makes c unfit for reuse.
func quiet(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	fit := false
	err = rc.Read(func(fd uintptr) bool {
		var b [1]byte
		_, _, rerr := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		fit = errors.Is(rerr, unix.EAGAIN)
		return true // never wait
	})
	return err == nil && fit
}
