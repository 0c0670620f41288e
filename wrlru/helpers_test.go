package wrlru

import (
	"runtime"
	"testing"
	"unsafe"
)

// obj is a key object of 32 bytes with a pointer-free body: large enough
// that the tiny allocator never packs two into one block, so each is
// collected on its own.
type obj struct {
	id  int
	pad [3]int64
}

func newObjs(n int) []*obj {
	out := make([]*obj, n)
	for i := range out {
		out[i] = &obj{id: i}
	}
	return out
}

// resident counts the entries of c by locking every shard in order and
// summing, so the count is one instant's truth.
func resident[T any, A comparable, V any](c *Cache[T, A, V]) int {
	for _, s := range c.shards {
		s.mu.Lock()
	}
	n := 0
	for _, s := range c.shards {
		n += len(s.m)
	}
	for _, s := range c.shards {
		s.mu.Unlock()
	}
	return n
}

// gcUntil runs the collector until cond holds, a bounded number of times:
// cleanups run after a cycle, on their own goroutine, so one GC is not
// enough and an unbounded loop could hang a failing test.
func gcUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	const maxCycles = 200
	for range maxCycles {
		if cond() {
			return
		}
		runtime.GC()
		runtime.Gosched()
	}
	if !cond() {
		t.Fatalf("after %d GC cycles: %s never held", maxCycles, what)
	}
}

// withProcs runs f as subtests at the default GOMAXPROCS and at 1 (the Go
// analogue of running Python's tests with and without the GIL).
func withProcs(t *testing.T, f func(t *testing.T)) {
	t.Run("default", f)
	t.Run("GOMAXPROCS=1", func(t *testing.T) {
		prev := runtime.GOMAXPROCS(1)
		defer runtime.GOMAXPROCS(prev)
		f(t)
	})
}

func unsafePointer(o *obj) unsafe.Pointer { return unsafe.Pointer(o) }
