package program_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/accelkit/accelkit/progcache/program"
)

func TestDefaultDir(t *testing.T) {
	moved := filepath.Join(t.TempDir(), "progs")
	t.Setenv(program.EnvCacheDir, moved)
	if d, err := program.DefaultDir(); err != nil || d != moved {
		t.Errorf("DefaultDir with %s=%s = %q, %v", program.EnvCacheDir, moved, d, err)
	}
	t.Setenv(program.EnvCacheDir, "relative/dir")
	if _, err := program.DefaultDir(); err == nil || !strings.Contains(err.Error(), "absolute") {
		t.Errorf("DefaultDir with a relative %s = %v, want an error asking for an absolute path", program.EnvCacheDir, err)
	}
	os.Unsetenv(program.EnvCacheDir)
	if runtime.GOOS != "linux" {
		return
	}
	xdg := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", xdg)
	if d, err := program.DefaultDir(); err != nil || d != filepath.Join(xdg, "accelkit", "programs") {
		t.Errorf("DefaultDir with XDG_CACHE_HOME=%s = %q, %v; want its accelkit/programs", xdg, d, err)
	}
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", "")
	if _, err := program.DefaultDir(); err == nil || !strings.Contains(err.Error(), program.EnvCacheDir) {
		t.Errorf("DefaultDir without a home = %v, want an error naming %s", err, program.EnvCacheDir)
	}
}

// TestDefaultCache: with no cache given, programs go to DefaultDir, which
// the environment variable moves, and nowhere else: the user cache
// directory stays empty.
func TestDefaultCache(t *testing.T) {
	_, cc := fakeNVRTC(t)
	userCache, moved := t.TempDir(), filepath.Join(t.TempDir(), "moved")
	t.Setenv("XDG_CACHE_HOME", userCache)
	t.Setenv(program.EnvCacheDir, moved)
	l, err := program.New(program.Options{Device: simDevice(t), Compiler: cc})
	if err != nil {
		t.Fatal(err)
	}
	p, err := l.Load(context.Background(), kernelSource())
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	if n, err := l.Cache().Len(context.Background()); err != nil || n != 1 {
		t.Errorf("default cache holds %d entries (%v), want 1", n, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Cache().Len(context.Background()); err == nil {
		t.Error("Close left the default cache open")
	}
	if ents, err := os.ReadDir(filepath.Join(moved, "entries")); err != nil || len(ents) == 0 {
		t.Errorf("%s/entries: %v, %v; want the entry", moved, ents, err)
	}
	if ents, _ := os.ReadDir(userCache); len(ents) != 0 {
		t.Errorf("the user cache directory holds %v with %s set; want nothing written there", ents, program.EnvCacheDir)
	}

	// A cache the caller gives stays open after Close.
	c := memCache(t)
	l, err = program.New(program.Options{Device: simDevice(t), Compiler: cc, Cache: c})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if _, err := c.Len(context.Background()); err != nil {
		t.Errorf("Close closed the caller's cache: %v", err)
	}
}
