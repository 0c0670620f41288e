package redistest

import (
	"net"
	"sync"
	"testing"
)

// Proxy forwards TCP connections from a loopback port to a server, and
// can stall them (bytes stop flowing, connections stay open: a server
// that hangs) or cut them (every connection closed, new ones closed at
// once: a server that is gone), then restore them.
//
// A Proxy is safe for concurrent use by multiple goroutines.
type Proxy struct {
	// Locking: mu guards stalled, resume, cut and conns; a forwarding
	// goroutine takes it only to read the state, never while it reads or
	// writes a connection.

	// Addr is the address clients dial.
	Addr   string
	target string
	ln     net.Listener
	wg     sync.WaitGroup

	mu      sync.Mutex
	stalled bool
	resume  chan struct{} // closed when a stall ends
	cut     bool
	closed  bool
	conns   map[net.Conn]struct{}
}

// NewProxy starts a proxy to target, closed when the test ends.
func NewProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	tb.Cleanup(p.Close)
	return p
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut || p.closed {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.mu.Unlock()
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.cut || p.closed {
			p.mu.Unlock()
			c.Close()
			s.Close()
			continue
		}
		p.conns[c], p.conns[s] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Go(func() { p.pipe(s, c) })
		p.wg.Go(func() { p.pipe(c, s) })
	}
}

// pipe copies src to dst, holding each chunk while the proxy is stalled,
// until either side closes; then it closes both.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer func() {
		p.mu.Lock()
		delete(p.conns, dst)
		delete(p.conns, src)
		p.mu.Unlock()
		dst.Close()
		src.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.wait() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// wait blocks while the proxy is stalled; it reports false when the
// connection is to be dropped (cut or closed).
func (p *Proxy) wait() bool {
	for {
		p.mu.Lock()
		if p.cut || p.closed {
			p.mu.Unlock()
			return false
		}
		if !p.stalled {
			p.mu.Unlock()
			return true
		}
		ch := p.resume
		p.mu.Unlock()
		<-ch
	}
}

// Stall stops forwarding: connections stay open, and bytes wait in the
// proxy until Resume.
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.stalled {
		p.stalled, p.resume = true, make(chan struct{})
	}
}

// Resume ends a stall: the held bytes flow on.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stalled {
		p.stalled = false
		close(p.resume)
	}
}

// Cut closes every connection, and every new one at once, until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.cut = true
	p.dropLocked()
	p.mu.Unlock()
}

// Restore ends a Cut: new connections are forwarded again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

// dropLocked closes every connection and wakes stalled forwarders, which
// then see cut or closed and return; mu is held.
func (p *Proxy) dropLocked() {
	for c := range p.conns {
		c.Close()
	}
	if p.stalled {
		p.stalled = false
		close(p.resume)
	}
}

// Close stops the proxy and waits for its goroutines.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.dropLocked()
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}
