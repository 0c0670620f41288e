// Package redistest runs real Redis servers for tests and benchmarks of
// code that uses redistier (and for redistier's own): a single node
// (Start; a replica is a single node started with "--replicaof"), a
// Sentinel that fails a master over to its replica (StartSentinel), a
// Redis Cluster of several masters (StartCluster), and a TCP proxy that
// can stall or cut the connections to one (NewProxy). Each server is a redis-server process on a free
// loopback port, in a temporary directory, without persistence, stopped
// by its PID when the test ends. A program that is not a test (accbench)
// starts one with Launch and stops it with Close.
//
// When redis-server is not installed, the test is skipped with the
// command that installs it, or fails if the environment sets
// ACCELKIT_REQUIRE_REDIS (CI does, so that these tests never silently
// skip there); Launch returns ErrNotInstalled.
package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RequireEnv names the environment variable that turns a missing
// redis-server from a skip into a failure.
const RequireEnv = "ACCELKIT_REQUIRE_REDIS"

// installHint says how to get the server.
const installHint = "redis-server not found in PATH: install it (Debian/Ubuntu: apt-get install redis-server; the tests need redis-server and redis-cli 7 or newer)"

// ErrNotInstalled is Launch's error when redis-server is not in PATH; its
// message says how to install it.
var ErrNotInstalled = errors.New("redistest: " + installHint)

const (
	// readyWait bounds how long a starting server may take to answer
	// PING: a loopback server with no data answers in milliseconds.
	readyWait = 10 * time.Second
	// stopWait is how long Stop waits after SIGTERM before SIGKILL.
	stopWait = 5 * time.Second
)

// Binary returns the path of redis-server, or skips (or fails, under
// RequireEnv) the test when it is not installed.
func Binary(tb testing.TB) string {
	tb.Helper()
	p, err := lookBinary()
	if err != nil {
		if os.Getenv(RequireEnv) != "" {
			tb.Fatalf("%s (%s is set, so this is a failure, not a skip)", installHint, RequireEnv)
		}
		tb.Skip(installHint)
	}
	return p
}

// lookBinary returns the path of redis-server, or ErrNotInstalled.
func lookBinary() (string, error) {
	p, err := exec.LookPath("redis-server")
	if err != nil {
		return "", fmt.Errorf("%w (%w)", ErrNotInstalled, err)
	}
	return p, nil
}

// Server is one redis-server process. Its methods are for one goroutine:
// the test's, or the program's that launched it.
type Server struct {
	// Addr is the server's address, 127.0.0.1:Port.
	Addr string
	Port int
	// Dir is the server's working directory (a test temporary directory,
	// or the one given to Launch).
	Dir string

	tb      testing.TB // the test of Start; nil for a server from Launch
	bin     string
	args    []string
	cmd     *exec.Cmd
	exited  chan struct{} // closed once the process is gone
	waitErr error         // cmd.Wait's result, set before exited closes
	log     string
}

// Start starts a redis-server on a free loopback port and returns once it
// answers PING; extra are more command-line options ("--maxmemory",
// "1mb", ...). The server is stopped when the test ends.
func Start(tb testing.TB, extra ...string) *Server {
	tb.Helper()
	Binary(tb) // skips, or fails under RequireEnv, without the server
	s, err := Launch(tb.TempDir(), extra...)
	if err != nil {
		tb.Fatal(err)
	}
	s.tb = tb
	tb.Cleanup(s.Stop)
	return s
}

// Launch starts a redis-server in dir (which must exist; the server keeps
// its log there and writes nothing else, as persistence is off) on a free
// loopback port and returns once it answers PING; extra are more
// command-line options. It is Start for a program that is not a test: the
// caller stops the server with Close. Without redis-server in PATH it
// returns an error wrapping ErrNotInstalled.
func Launch(dir string, extra ...string) (*Server, error) {
	bin, err := lookBinary()
	if err != nil {
		return nil, err
	}
	// A free port found by listening on port 0 can be taken by another
	// process before the server binds it: try a few.
	for range 3 {
		port, perr := FreePort()
		if perr != nil {
			return nil, perr
		}
		s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Port: port, Dir: dir, bin: bin}
		s.args = append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir}, extra...)
		if err = s.start(); err == nil {
			return s, nil
		}
	}
	return nil, fmt.Errorf("redistest: start redis-server: %w", err)
}

// FreePort returns a loopback TCP port that was free a moment ago, for a
// server option that takes a second port ("--tls-port").
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("redistest: find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// start runs the server process and waits until it answers PING.
func (s *Server) start() error {
	s.log = filepath.Join(s.Dir, fmt.Sprintf("redis-%d.log", s.Port))
	logf, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close() // the child has its own descriptor
	cmd := exec.Command(s.bin, s.args...)
	cmd.Dir = s.Dir
	cmd.Stdout, cmd.Stderr = logf, logf
	setProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	s.cmd, s.exited = cmd, exited
	go func() {
		s.waitErr = cmd.Wait()
		close(exited)
	}()
	if err := waitReady(s.Addr, exited, &s.waitErr); err != nil {
		s.kill()
		return fmt.Errorf("%w; its log:\n%s", err, s.logTail())
	}
	return nil
}

// waitReady polls addr with PING until it answers, the process exits
// (exited closes, after *waitErr is set), or readyWait passes.
func waitReady(addr string, exited <-chan struct{}, waitErr *error) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond, ReadTimeout: time.Second})
	defer c.Close()
	deadline := time.Now().Add(readyWait)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("redis-server on %s exited before answering: %w", addr, *waitErr)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on %s did not answer PING within %v: %w", addr, readyWait, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// PID returns the server process's ID.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// fatalf fails the test that started the server. Kill and Restart are
// test helpers: a server from Launch has no test, and there they panic
// with the message.
func (s *Server) fatalf(format string, args ...any) {
	if s.tb == nil {
		panic(fmt.Sprintf(format, args...))
	}
	s.tb.Helper()
	s.tb.Fatalf(format, args...)
}

// Kill ends the server with SIGKILL, as a crash would, and waits until the
// process is gone; Restart starts it again.
func (s *Server) Kill() {
	if !s.kill() {
		s.fatalf("redistest: redis-server %d on %s was not running", s.PID(), s.Addr)
	}
}

// kill sends SIGKILL and waits; it reports whether the process was
// running.
func (s *Server) kill() bool {
	if s.cmd == nil || s.exited == nil {
		return false
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
	s.exited = nil
	return true
}

// Restart starts the server again on the same port and directory after
// Kill or Stop, and returns once it answers PING.
func (s *Server) Restart() {
	if s.exited != nil {
		s.fatalf("redistest: Restart of redis-server %d on %s, which is still running", s.PID(), s.Addr)
	}
	if err := s.start(); err != nil {
		s.fatalf("redistest: restart redis-server on %s: %v", s.Addr, err)
	}
}

// Close ends the server: SIGTERM, then SIGKILL if it has not exited within
// stopWait. It returns an error when the server had to be killed, or had
// exited on its own or with a failure status (a crash); closing a stopped
// server does nothing and returns nil. Close keeps Dir.
func (s *Server) Close() error {
	if s.exited == nil {
		return nil
	}
	pid := s.PID()
	_ = s.cmd.Process.Signal(syscall.SIGTERM) // fails only if it has exited: waitErr says how
	select {
	case <-s.exited:
		s.exited = nil
		if s.waitErr != nil {
			return fmt.Errorf("redistest: redis-server %d on %s: %w; its log:\n%s", pid, s.Addr, s.waitErr, s.logTail())
		}
		return nil
	case <-time.After(stopWait):
		s.kill()
		return fmt.Errorf("redistest: redis-server %d on %s did not exit within %v of SIGTERM: killed", pid, s.Addr, stopWait)
	}
}

// Stop is Close for a test (Start registers it as a cleanup): an error is
// logged, not failed on.
func (s *Server) Stop() {
	if err := s.Close(); err != nil && s.tb != nil {
		s.tb.Log(err)
	}
}

// Client returns a go-redis client of the server, closed when the test
// ends.
func (s *Server) Client(tb testing.TB) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	tb.Cleanup(func() { c.Close() })
	return c
}

// CLI runs redis-cli against the server with args and returns its output.
func (s *Server) CLI(args ...string) (string, error) {
	out, err := exec.Command("redis-cli", append([]string{"-h", "127.0.0.1", "-p", strconv.Itoa(s.Port)}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("redis-cli %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// logTail returns the end of the server's log, for an error message.
func (s *Server) logTail() string {
	b, err := os.ReadFile(s.log)
	if err != nil {
		return err.Error()
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}
