package redistest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// Sentinel timings: short, so that a test sees a failover in seconds.
const (
	sentinelDownAfterMS   = 500
	sentinelFailoverAfter = 3000
)

// StartSentinel starts a Redis Sentinel that monitors master under name
// with a quorum of 1, so that it alone fails over: it declares the master
// down after 500 ms without an answer and promotes one of the master's
// replicas (servers started with "--replicaof", master's host and port).
// It returns once the Sentinel answers PING; it is stopped when the test
// ends. The returned Server's Addr is the Sentinel's, for
// redis.FailoverOptions.SentinelAddrs.
func StartSentinel(tb testing.TB, master *Server, name string) *Server {
	tb.Helper()
	bin := Binary(tb)
	dir := tb.TempDir()
	var err error
	for range 3 { // a free port can be taken before the Sentinel binds it
		var port int
		if port, err = FreePort(); err != nil {
			tb.Fatal(err)
		}
		// Sentinel rewrites its configuration file as it learns the
		// replicas and the failovers: the file is its own.
		conf := filepath.Join(dir, fmt.Sprintf("sentinel-%d.conf", port))
		text := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\n"+
			"sentinel monitor %s 127.0.0.1 %d 1\n"+
			"sentinel down-after-milliseconds %s %d\n"+
			"sentinel failover-timeout %s %d\n",
			port, dir, name, master.Port, name, sentinelDownAfterMS, name, sentinelFailoverAfter)
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			tb.Fatal(err)
		}
		s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Port: port, Dir: dir, bin: bin,
			args: []string{conf, "--sentinel"}, tb: tb}
		if err = s.start(); err == nil {
			tb.Cleanup(s.Stop)
			return s
		}
	}
	tb.Fatalf("redistest: start redis sentinel: %v", err)
	return nil
}
