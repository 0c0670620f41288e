//go:build linux && cgo

package capi

import (
	"errors"
	"runtime"
	"sync"
	"testing"

	"github.com/accelkit/accelkit/devalloc"
	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/cuda"
	"github.com/accelkit/accelkit/driver/cuda/cudatest"
)

func openTest(t *testing.T) (*Library, *cudatest.Lib) {
	t.Helper()
	fake := cudatest.Build(t)
	l, err := Open("lib="+fake.Path, devalloc.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, fake
}

// TestStreamOrderedFree: a free returns the block to the pool of the
// stream it was allocated on, reusable at once there and not handed to
// another stream (cross_stream_reuse is off).
func TestStreamOrderedFree(t *testing.T) {
	l, fake := openTest(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	rt, err := fake.Runtime()
	if err != nil {
		t.Fatal(err)
	}
	ctx, _ := rt.RetainPrimary(0)
	defer rt.ReleasePrimary(0)
	rt.SetCurrent(ctx)
	a, _ := rt.NewStream()
	b, _ := rt.NewStream()
	p, err := l.Alloc(1<<20, 0, a)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Free(p, 1<<20, 0, a); err != nil {
		t.Fatal(err)
	}
	q, err := l.Alloc(1<<20, 0, b)
	if err != nil {
		t.Fatal(err)
	}
	if q == p {
		t.Fatal("a block freed on stream a went to stream b without an order between them")
	}
	r, err := l.Alloc(1<<20, 0, a)
	if err != nil {
		t.Fatal(err)
	}
	if r != p {
		t.Errorf("stream a's freed block was not reused by stream a: got %#x, want %#x", r, p)
	}
	// A free on another stream than the allocation's notes that stream
	// too: the block waits for both (an event each) before reuse.
	records := fake.Counter("cuEventRecord")
	if err := l.Free(r, 1<<20, 0, b); err != nil {
		t.Fatal(err)
	}
	if fake.Counter("cuEventRecord") == records {
		t.Error("a free on another stream recorded no event on it")
	}
	l.Free(q, 1<<20, 0, b)
}

// TestBadCallsChangeNothing, in-process: each bad call is refused and the
// allocation stays live and freeable.
func TestBadCallsChangeNothing(t *testing.T) {
	l, _ := openTest(t)
	p, err := l.Alloc(4096, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		p         uintptr
		size      uint64
		dev       int
		checkSize bool
		want      error
	}{
		{"unknown pointer", p + 512, 4096, 1, true, driver.ErrInvalidPointer},
		{"wrong size", p, 4095, 1, true, driver.ErrInvalidValue},
		{"other device", p, 4096, 0, true, driver.ErrInvalidValue},
		{"no such device", p, 4096, 2, true, driver.ErrInvalidValue},
		{"negative device", p, 0, -1, false, driver.ErrInvalidValue},
	} {
		if err := l.release(c.p, c.size, c.checkSize, c.dev, 0); !errors.Is(err, c.want) {
			t.Errorf("%s: free = %v, want %v", c.name, err, c.want)
		}
	}
	if got := l.devs[1].res.Stats().Map()["allocated_bytes.all.current"]; got != 4096 {
		t.Errorf("after the bad calls %d bytes are allocated, want 4096", got)
	}
	if err := l.Free(p, 4096, 1, 0); err != nil {
		t.Fatal(err)
	}
}

// TestConcurrentThreads: goroutines on their own OS threads allocate and
// free on their per-thread default streams and a shared stream at once
// (go test -race watches the live table and the exports' Go side).
func TestConcurrentThreads(t *testing.T) {
	l, _ := openTest(t)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			streams := []uintptr{0, cuda.StreamLegacy, cuda.StreamPerThread}
			var held []uintptr
			for i := range 300 {
				size := uint64(1 + (i*7919+g*104729)%(1<<16))
				s := streams[i%3]
				p, err := l.Alloc(size, g%2, s)
				if err != nil {
					t.Error(err)
					return
				}
				if err := l.Free(p, size, g%2, s); err != nil {
					t.Error(err)
					return
				}
				if q, err := l.Alloc(512, g%2, s); err == nil {
					held = append(held, q)
				}
			}
			for i, q := range held {
				if err := l.Free(q, 512, g%2, streams[i%3]); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	for i := range l.devs {
		if got := l.devs[i].res.Stats().Map()["allocated_bytes.all.current"]; got != 0 {
			t.Errorf("device %d: %d bytes left allocated", i, got)
		}
	}
}

// BenchmarkAllocFreePair is the Go side of one alloc+free pair of 4 KiB
// on the legacy default stream, against the fake (the C harness's
// firstcall mode measures the pair through the C ABI).
func BenchmarkAllocFreePair(b *testing.B) {
	fake := cudatest.Build(b)
	l, err := Open("lib="+fake.Path, devalloc.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	for b.Loop() {
		p, err := l.Alloc(4096, 0, 0)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Free(p, 4096, 0, 0); err != nil {
			b.Fatal(err)
		}
	}
}
