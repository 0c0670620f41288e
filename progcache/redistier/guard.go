package redistier

// The reply guard: a dial hook that puts the RESP length scanner (resp.go)
// between each connection and go-redis, so that a reply declaring more
// than the limit is refused before go-redis allocates anything for it.
//
// New installs it on the client it is given, with go-redis's AddHook: a
// *redis.Client (NewClient, NewFailoverClient, a UniversalClient of one
// address or a master name) dials through its hooks, so every connection
// it opens from then on is guarded. A ClusterClient dials through the
// clients of its nodes, which it creates as it learns of them; New asks it
// (OnNewNode) to give each new node's client the hook. A Ring's shards
// exist from NewRing: New hooks them and the ones it adds later.
//
// The guard cannot reach a connection opened before New: the first command
// a client sends opens one (and a ClusterClient learns its nodes then), so
// a cache made before the client's first command guards all of them.
// Cache.Guarded reports what it could not guard. The connections to
// Sentinels (which go-redis makes with clients of their own) are not
// guarded either.
//
// Several caches may share a client: each installs the guard once per
// client (guards, below), and its limit is the largest that any of them
// needs, so that none refuses another's entries.

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"weak"

	"github.com/redis/go-redis/v9"
)

// MinReplyLimit is the least the reply guard lets one reply declare,
// whatever Options.MaxEntryBytes says: SCAN's pages of keys (Len, Clear),
// CLUSTER SLOTS and HELLO stay well below it, so a small entry cap never
// breaks the cache's own commands.
const MinReplyLimit = 4 << 20

// guardSlack is what the guard lets a reply declare beyond
// Options.MaxEntryBytes: the header, and the one byte past the cap by
// which a lookup (getEntry) knows a value over it.
const guardSlack = 64

// guard is the reply guard of one client.
//
// Locking: limit is an atomic, raised by each cache that joins; the rest
// is set before the guard is shared.
type guard struct {
	limit atomic.Int64
}

var _ redis.Hook = (*guard)(nil)

// raise makes the guard let through replies of up to n bytes.
func (g *guard) raise(n int64) {
	for {
		old := g.limit.Load()
		if n <= old || g.limit.CompareAndSwap(old, n) {
			return
		}
	}
}

// DialHook wraps each connection next opens in a guardedConn.
func (g *guard) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err != nil {
			return conn, err
		}
		gc := &guardedConn{Conn: conn, g: g}
		if sc, ok := conn.(syscall.Conn); ok {
			// go-redis's pool health check peeks at the socket
			// (MSG_PEEK: it consumes nothing the scanner must see).
			return &guardedSysConn{guardedConn: gc, sc: sc}, nil
		}
		return gc, nil
	}
}

func (g *guard) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (g *guard) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// guardedConn is a connection whose reads go through a respScanner.
//
// Locking: Read is not safe for concurrent use (go-redis reads a
// connection from one goroutine at a time); the other methods are the
// wrapped connection's.
type guardedConn struct {
	net.Conn
	g   *guard
	s   respScanner
	err error // sticky: the scanner refused the stream
}

// Read reads from the connection and passes on the bytes up to the first
// header the scanner refuses; the next Read returns the refusal.
func (c *guardedConn) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.Conn.Read(p)
	c.s.limit = c.g.limit.Load()
	ok, serr := c.s.scan(p[:n])
	if serr != nil {
		c.err = fmt.Errorf("redistier: %s: %w", c.Conn.RemoteAddr(), serr)
		if ok == 0 {
			return 0, c.err
		}
		return ok, nil
	}
	return n, err
}

// guardedSysConn is a guardedConn on a connection with a file descriptor.
type guardedSysConn struct {
	*guardedConn
	sc syscall.Conn
}

func (c *guardedSysConn) SyscallConn() (syscall.RawConn, error) { return c.sc.SyscallConn() }

// guards holds the guard of each client that a cache guarded, keyed by a
// weak pointer to the client, so that a second cache on the same client
// raises its limit instead of stacking another scanner, and a client that
// is collected drops out.
var guards sync.Map // weak.Pointer[T] -> *guard

// guardClient installs the guard on client (once per client) and raises
// its limit to at least limit. It returns what it could not guard: nil, or
// an error saying which connections read replies unguarded.
func guardClient(client redis.UniversalClient, limit int64) error {
	switch c := client.(type) {
	case *redis.Client:
		g, fresh := guardFor(c)
		g.raise(limit)
		if fresh {
			c.AddHook(g)
		}
		if n := openConns(c.PoolStats()); n > 0 {
			return fmt.Errorf("redistier: %d connection(s) the client opened before New read replies without the reply guard until they close: make the cache before the client's first command", n)
		}
		return nil
	case *redis.ClusterClient:
		g, fresh := guardFor(c)
		g.raise(limit)
		if fresh {
			c.OnNewNode(func(node *redis.Client) { node.AddHook(g) })
		}
		return nil
	case *redis.Ring:
		g, fresh := guardFor(c)
		g.raise(limit)
		open := 0
		if fresh {
			c.OnNewNode(func(node *redis.Client) { node.AddHook(g) })
			var mu sync.Mutex
			_ = c.ForEachShard(context.Background(), func(_ context.Context, node *redis.Client) error {
				node.AddHook(g)
				mu.Lock()
				open += openConns(node.PoolStats())
				mu.Unlock()
				return nil
			})
		}
		if open > 0 {
			return fmt.Errorf("redistier: %d connection(s) the ring opened before New read replies without the reply guard until they close: make the cache before the ring's first command", open)
		}
		return nil
	}
	return fmt.Errorf("redistier: a client of type %T: the reply guard knows how to hook only *redis.Client, *redis.ClusterClient and *redis.Ring, so a server can make this one allocate what it likes", client)
}

// openConns counts the connections of a client's pools.
func openConns(s *redis.PoolStats) int {
	n := int(s.TotalConns)
	if s.PipelineStats != nil {
		n += int(s.PipelineStats.TotalConns)
	}
	return n
}

// guardFor returns c's guard, and whether it was made by this call.
func guardFor[T any](c *T) (*guard, bool) {
	key := weak.Make(c)
	if g, ok := guards.Load(key); ok {
		return g.(*guard), false
	}
	g, loaded := guards.LoadOrStore(key, &guard{})
	if !loaded {
		runtime.AddCleanup(c, func(k weak.Pointer[T]) { guards.Delete(k) }, key)
	}
	return g.(*guard), !loaded
}
