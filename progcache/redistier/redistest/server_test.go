package redistest

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestLaunchClose checks the entry point for programs: Launch starts a
// server that answers in the given directory, Close stops it by its PID
// and is idempotent, and Close reports a server that died under it.
func TestLaunchClose(t *testing.T) {
	Binary(t)
	ctx := context.Background()
	s, err := Launch(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer c.Close()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	want, err := filepath.EvalSymlinks(s.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if dir, err := c.ConfigGet(ctx, "dir").Result(); err != nil || dir["dir"] != want {
		t.Errorf("server dir %v (%v), want %s", dir, err, want)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if st := s.cmd.ProcessState; st == nil || !st.Exited() {
		t.Errorf("process %d after Close: state %v, want exited", s.PID(), st)
	}
	if err := c.Ping(ctx).Err(); err == nil {
		t.Error("the server answers PING after Close")
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}

	s, err = Launch(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("Close of a server killed under it = %v, want an error saying how it ended", err)
	}
}

// TestLaunchNotInstalled checks that without redis-server in PATH Launch
// says how to install it, under ErrNotInstalled.
func TestLaunchNotInstalled(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	s, err := Launch(t.TempDir())
	if s != nil || !errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), "apt-get install redis-server") {
		t.Errorf("Launch = %v, %v; want ErrNotInstalled with the install command", s, err)
	}
}
