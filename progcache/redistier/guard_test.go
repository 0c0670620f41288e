package redistier_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/accelkit/accelkit/progcache"
	"github.com/accelkit/accelkit/progcache/cachetest"
	"github.com/accelkit/accelkit/progcache/redistier"
	"github.com/redis/go-redis/v9"
)

// fakeServer is a TCP server on loopback that speaks enough RESP for
// go-redis to connect (HELLO refused, so RESP2; CLIENT and PING answered)
// and answers every GET and GETRANGE with a reply of the test's choosing: a hostile or
// broken server.
type fakeServer struct {
	addr     string
	getReply string

	mu   sync.Mutex
	seen []string // the commands received, by name
}

func newFakeServer(t *testing.T, getReply string) *fakeServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &fakeServer{addr: ln.Addr().String(), getReply: getReply}
	var wg sync.WaitGroup
	var connsMu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		connsMu.Lock()
		for _, c := range conns {
			c.Close()
		}
		connsMu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			connsMu.Lock()
			conns = append(conns, conn)
			connsMu.Unlock()
			wg.Go(func() { s.serve(conn) })
		}
	})
	return s
}

func (s *fakeServer) serve(conn net.Conn) {
	defer conn.Close()
	r := bufio.NewReader(conn)
	for {
		args, err := readCommand(r)
		if err != nil {
			return
		}
		name := strings.ToUpper(args[0])
		s.mu.Lock()
		s.seen = append(s.seen, name)
		s.mu.Unlock()
		var reply string
		switch name {
		case "HELLO":
			reply = "-ERR unknown command 'HELLO'\r\n"
		case "PING":
			reply = "+PONG\r\n"
		case "GET", "GETRANGE":
			reply = s.getReply
		case "EVALSHA", "EVAL":
			reply = ":0\r\n"
		default:
			reply = "+OK\r\n"
		}
		if _, err := io.WriteString(conn, reply); err != nil {
			return
		}
	}
}

// saw reports whether the server received a command named name.
func (s *fakeServer) saw(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.seen {
		if n == name {
			return true
		}
	}
	return false
}

// readCommand reads one command as clients send it: an array of bulk
// strings.
func readCommand(r *bufio.Reader) ([]string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(line, "*") {
		return nil, fmt.Errorf("not a command: %q", line)
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil || n < 1 || n > 64 {
		return nil, fmt.Errorf("bad command header %q", line)
	}
	args := make([]string, n)
	for i := range args {
		h, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		size, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(h, "$")))
		if err != nil || size < 0 || size > 1<<20 {
			return nil, fmt.Errorf("bad argument header %q", h)
		}
		b := make([]byte, size+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		args[i] = string(b[:size])
	}
	return args, nil
}

// TestHostileServerReplies: a server that answers GET with a reply that
// declares more than the entry cap (up to 10^11 bytes, which go-redis
// would allocate before reading: a fatal out of memory) neither kills nor
// stalls the client. The guard New puts on the client the user built
// refuses the reply at its header; the lookup is a counted miss that does
// not feed the breaker, and the cache asks the server to delete the value.
func TestHostileServerReplies(t *testing.T) {
	for _, reply := range []string{
		// Just over the guard's limit (MinReplyLimit, as the entry cap is
		// below it), and nothing after it: go-redis would allocate it and
		// wait out the timeout for the rest.
		fmt.Sprintf("$%d\r\n", redistier.MinReplyLimit+1),
		"$100000000000\r\n",
		"*100000000000\r\n",
		"%100000000000\r\n",
		"|1\r\n+a\r\n+b\r\n$100000000000\r\n",
		">100000000000\r\n",
		"!100000000000\r\n",
		"=100000000000\r\n",
		"-ERR " + strings.Repeat("x", 5<<20) + "\r\n",
	} {
		name := reply
		if len(name) > 24 {
			name = name[:24]
		}
		t.Run(strconv.Quote(name), func(t *testing.T) {
			srv := newFakeServer(t, reply)
			client := redis.NewClient(&redis.Options{Addr: srv.addr, ContextTimeoutEnabled: true, MaxRetries: -1})
			t.Cleanup(func() { client.Close() })
			c := openCache(t, client, redistier.Options{Timeout: 2 * time.Second, BreakerFailures: 1, MaxEntryBytes: 1 << 20})
			if err := c.Guarded(); err != nil {
				t.Fatalf("a cache on a fresh *redis.Client: Guarded() = %v, want nil", err)
			}
			start := time.Now()
			if _, ok, err := c.Get(bg, cachetest.KeyN(1)); ok || err != nil {
				t.Fatalf("Get from a hostile server = hit %v, %v; want a miss without an error", ok, err)
			}
			took := time.Since(start)
			s := c.RedisStats()
			if s.Oversized != 1 || s.Misses != 1 || s.Timeouts != 0 || s.Breaker != redistier.BreakerClosed {
				t.Fatalf("after the hostile reply (in %v): %+v; want 1 oversized miss, no timeout, the breaker closed", took, s)
			}
			if !srv.saw("EVALSHA") && !srv.saw("EVAL") {
				t.Error("the cache did not ask the server to delete the over-cap value")
			}
			// The client the user built is guarded for every command.
			if err := client.Get(bg, "any").Err(); !errors.Is(err, redistier.ErrReplyTooLarge) {
				t.Errorf("a raw GET through the guarded client = %v, want ErrReplyTooLarge", err)
			}
			// Prefetch: each refused key is a miss, the others go on.
			n, err := c.Prefetch(bg, []progcache.Key{cachetest.KeyN(1), cachetest.KeyN(2)}, func(progcache.Key, progcache.Object) error { return nil })
			if n != 0 || err != nil {
				t.Errorf("Prefetch from a hostile server = %d, %v; want 0, nil", n, err)
			}
			if s := c.RedisStats(); s.Oversized != 3 || s.PrefetchMisses != 2 || s.Breaker != redistier.BreakerClosed {
				t.Errorf("after Prefetch: %+v; want 3 oversized, 2 prefetch misses, the breaker closed", s)
			}
		})
	}
}

// TestHostileNesting: a reply nested a million levels deep, which
// go-redis would parse with a million nested calls on the goroutine's
// stack, is refused at the guard's depth.
func TestHostileNesting(t *testing.T) {
	srv := newFakeServer(t, strings.Repeat("*1\r\n", 1<<20))
	client := redis.NewClient(&redis.Options{Addr: srv.addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { client.Close() })
	openCache(t, client, redistier.Options{})
	if err := client.Do(bg, "GET", "k").Err(); !errors.Is(err, redistier.ErrReplyTooLarge) {
		t.Errorf("a reply nested 2^20 deep = %v, want ErrReplyTooLarge", err)
	}
}

// TestGuardedReportsEarlyConns: connections a client opened before New
// are out of the guard's reach, and Guarded says so; a client of a type
// New cannot hook is reported too.
func TestGuardedReportsEarlyConns(t *testing.T) {
	srv := newFakeServer(t, "$-1\r\n")
	client := redis.NewClient(&redis.Options{Addr: srv.addr})
	t.Cleanup(func() { client.Close() })
	if err := client.Ping(bg).Err(); err != nil {
		t.Fatal(err)
	}
	c := openCache(t, client, redistier.Options{})
	if err := c.Guarded(); err == nil || !strings.Contains(err.Error(), "before New") {
		t.Errorf("Guarded() on a client used before New = %v, want an error naming the connections opened before New", err)
	}
	other := openCache(t, wrappedClient{client}, redistier.Options{})
	if err := other.Guarded(); err == nil || !strings.Contains(err.Error(), "wrappedClient") {
		t.Errorf("Guarded() on a client of another type = %v, want an error naming the type", err)
	}
}

// wrappedClient is a UniversalClient of a type redistier does not know.
type wrappedClient struct{ *redis.Client }
