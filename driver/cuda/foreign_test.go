//go:build linux && cgo

package cuda_test

import (
	"errors"
	"runtime"
	"sync"
	"testing"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/cuda"
	"github.com/accelkit/accelkit/driver/cuda/cudatest"
)

// openCudatest opens the backend on a fresh cudatest fake, closed at the
// end of the test.
func openCudatest(t *testing.T) (*cudatest.Lib, driver.Driver) {
	t.Helper()
	l := cudatest.Build(t)
	drv, err := cuda.Open("lib=" + l.Path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	return l, drv
}

// TestForeignPrimaryContext: the context a foreign runtime retains and
// makes current is the one accelkit uses, so on a thread the runtime has
// set up accelkit's calls switch nothing (no cuCtxSetCurrent), and on a
// thread nobody has set up accelkit makes it current itself.
func TestForeignPrimaryContext(t *testing.T) {
	l, drv := openCudatest(t)
	rt, err := l.Runtime()
	if err != nil {
		t.Fatal(err)
	}
	dev, _ := drv.Device(1)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ctx, err := rt.RetainPrimary(1)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.ReleasePrimary(1)
	if err := rt.SetCurrent(ctx); err != nil {
		t.Fatal(err)
	}
	sets := l.Counter("cuCtxSetCurrent")
	p, err := dev.Malloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	if err := dev.Free(p); err != nil {
		t.Fatal(err)
	}
	if got := l.Counter("cuCtxSetCurrent"); got != sets {
		t.Errorf("accelkit switched contexts %d times on a thread where the runtime made device 1's primary context current: not the same context", got-sets)
	}

	done := make(chan uintptr)
	go func() { // a fresh locked thread: nothing current until accelkit's call
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		if _, err := dev.Malloc(512); err != nil {
			t.Error(err)
		}
		done <- rt.Current()
	}()
	if got := <-done; got != ctx {
		t.Errorf("after accelkit's call on a new thread, the current context is %#x, want device 1's primary context %#x", got, ctx)
	}
}

// TestForeignStream: a caller's stream is used as it is, one handle one
// stream, and accelkit never destroys it, not at Destroy and not at Close.
func TestForeignStream(t *testing.T) {
	l, drv := openCudatest(t)
	rt, err := l.Runtime()
	if err != nil {
		t.Fatal(err)
	}
	dev, _ := drv.Device(0)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ctx, err := rt.RetainPrimary(0)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.ReleasePrimary(0)
	if err := rt.SetCurrent(ctx); err != nil {
		t.Fatal(err)
	}
	h, err := rt.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	s, err := cuda.ForeignStream(dev, h)
	if err != nil {
		t.Fatal(err)
	}
	again, err := cuda.ForeignStream(dev, h)
	if err != nil {
		t.Fatal(err)
	}
	if s != again || s.ID() == 0 || !cuda.IsForeign(s) {
		t.Fatalf("ForeignStream(%#x) twice: %v (ID %d) and %v: want one foreign stream with a non-zero ID", h, s, s.ID(), again)
	}
	ev, err := dev.NewEvent()
	if err != nil {
		t.Fatal(err)
	}
	records := l.Counter("cuEventRecord")
	if err := ev.Record(s); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if l.Counter("cuEventRecord") != records+1 {
		t.Error("Event.Record on the foreign stream made no cuEventRecord")
	}
	ev.Destroy()
	destroys := l.Counter("cuStreamDestroy_v2")
	if err := s.Destroy(); !errors.Is(err, driver.ErrInvalidValue) {
		t.Errorf("Destroy of a foreign stream = %v, want an error wrapping ErrInvalidValue", err)
	}
	if err := drv.Close(); err != nil {
		t.Fatal(err)
	}
	if got := l.Counter("cuStreamDestroy_v2"); got != destroys {
		t.Errorf("accelkit called cuStreamDestroy_v2 %d times on the caller's stream", got-destroys)
	}
	if r := rt.DestroyStream(h); r != 0 {
		t.Errorf("the caller's own cuStreamDestroy after accelkit closed = CUresult %d, want 0 (the stream still live)", r)
	}
}

// TestForeignStreamDefaults: 0 and CU_STREAM_LEGACY are the legacy default
// stream; CU_STREAM_PER_THREAD is one stream per OS thread, passed to the
// driver as 0x2; an unknown handle is refused.
func TestForeignStreamDefaults(t *testing.T) {
	l, drv := openCudatest(t)
	dev, _ := drv.Device(0)
	for _, h := range []uintptr{0, cuda.StreamLegacy} {
		s, err := cuda.ForeignStream(dev, h)
		if err != nil {
			t.Fatal(err)
		}
		if s != dev.DefaultStream() {
			t.Errorf("ForeignStream(%#x) = stream %d, want the legacy default stream", h, s.ID())
		}
	}
	var mu sync.Mutex
	ids := map[uint64]bool{}
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread() // never unlocked: each goroutine has a thread of its own
			s, err := cuda.ForeignStream(dev, cuda.StreamPerThread)
			if err != nil {
				t.Error(err)
				return
			}
			if again, _ := cuda.ForeignStream(dev, cuda.StreamPerThread); again != s {
				t.Error("ForeignStream(CU_STREAM_PER_THREAD) twice on one thread: two streams")
			}
			if err := s.Synchronize(); err != nil {
				t.Error(err)
			}
			mu.Lock()
			ids[s.ID()] = true
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(ids) != 3 {
		t.Errorf("CU_STREAM_PER_THREAD on 3 threads gave %d streams, want 3", len(ids))
	}
	if got := l.DefaultStreamUses(cuda.StreamPerThread); got < 3 {
		t.Errorf("the driver saw the handle 0x2 %d times, want at least 3 (one synchronize per thread)", got)
	}
	if _, err := cuda.ForeignStream(dev, 0xdead0000); !errors.Is(err, driver.ErrInvalidValue) {
		t.Errorf("ForeignStream of an unknown handle = %v, want an error wrapping ErrInvalidValue", err)
	}
}
