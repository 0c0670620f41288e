package evpool_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/drivertest"
	"github.com/accelkit/accelkit/evpool"
)

// fakeHandle stands for a library context: it remembers its stream and
// counts how often it was destroyed.
type fakeHandle struct {
	dev       int
	stream    uint64
	destroyed atomic.Int32
}

// handleLog counts creates and destroys.
type handleLog struct {
	creates  sync.Map // streamKey -> *atomic.Int32
	made     atomic.Int64
	mu       sync.Mutex
	all      []*fakeHandle
	failNext atomic.Int32 // creates to fail before succeeding
}

type key struct {
	dev int
	id  uint64
}

func (l *handleLog) create(s driver.Stream) (*fakeHandle, error) {
	k := key{s.Device().Ordinal(), s.ID()}
	c, _ := l.creates.LoadOrStore(k, new(atomic.Int32))
	c.(*atomic.Int32).Add(1)
	if l.failNext.Add(-1) >= 0 {
		return nil, errCreate
	}
	h := &fakeHandle{dev: k.dev, stream: k.id}
	l.mu.Lock()
	l.all = append(l.all, h)
	l.mu.Unlock()
	l.made.Add(1)
	return h, nil
}

func (l *handleLog) destroy(h *fakeHandle) error {
	h.destroyed.Add(1)
	return nil
}

var errCreate = errors.New("create failed")

func TestHandlesCreateOnceConcurrent(t *testing.T) {
	drv := drivertest.OpenDriver(t, "sim", "devices=2,"+simDSN)
	var streams []driver.Stream
	for i := range 2 {
		dev := deviceOf(t, drv, i)
		// The default streams of both devices have ID 0: the key must
		// still tell them apart.
		streams = append(streams, dev.DefaultStream())
		streams = append(streams, newStreams(t, dev, 7)...)
	}
	log := &handleLog{}
	hs := evpool.NewHandles(log.create, log.destroy)
	const workers = 16
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			<-start
			for i := range 50 {
				s := streams[(w+i)%len(streams)]
				h, err := hs.Get(s)
				if err != nil {
					t.Error(err)
					return
				}
				if h.dev != s.Device().Ordinal() || h.stream != s.ID() {
					t.Errorf("Get(stream %d of device %d) = handle of stream %d of device %d",
						s.ID(), s.Device().Ordinal(), h.stream, h.dev)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	if got := log.made.Load(); got != int64(len(streams)) {
		t.Errorf("made %d handles for %d streams", got, len(streams))
	}
	log.creates.Range(func(k, v any) bool {
		if n := v.(*atomic.Int32).Load(); n != 1 {
			t.Errorf("create ran %d times for %v, want once", n, k)
		}
		return true
	})
	if err := hs.Close(); err != nil {
		t.Fatal(err)
	}
	for _, h := range log.all {
		if n := h.destroyed.Load(); n != 1 {
			t.Errorf("handle of stream %d device %d destroyed %d times, want once", h.stream, h.dev, n)
		}
	}
	for _, s := range streams {
		if _, err := hs.Get(s); !errors.Is(err, evpool.ErrClosed) || !errors.Is(err, driver.ErrClosed) {
			t.Fatalf("Get after Close = %v, want driver.ErrClosed", err)
		}
	}
	if err := hs.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
}

func TestHandlesErrorsNotCached(t *testing.T) {
	dev, _ := drivertest.OpenDevice(t, "sim", simDSN)
	s := dev.DefaultStream()
	log := &handleLog{}
	log.failNext.Store(2)
	hs := evpool.NewHandles(log.create, log.destroy)
	defer hs.Close()
	for i := range 2 {
		if _, err := hs.Get(s); !errors.Is(err, errCreate) {
			t.Fatalf("Get %d = %v, want the create error", i, err)
		}
	}
	h, err := hs.Get(s)
	if err != nil {
		t.Fatalf("Get after two failed creates = %v, want a handle", err)
	}
	if h2, _ := hs.Get(s); h2 != h {
		t.Fatalf("second Get returned another handle")
	}
	v, _ := log.creates.Load(key{0, 0})
	if n := v.(*atomic.Int32).Load(); n != 3 {
		t.Fatalf("create ran %d times, want 3 (2 failures, 1 success, then a hit)", n)
	}
}

func TestHandlesWaitersShareCreate(t *testing.T) {
	dev, _ := drivertest.OpenDevice(t, "sim", simDSN)
	s := dev.DefaultStream()
	entered := make(chan struct{})
	release := make(chan struct{})
	var calls atomic.Int32
	hs := evpool.NewHandles(func(driver.Stream) (int, error) {
		if calls.Add(1) == 1 {
			close(entered)
			<-release
		}
		return 42, nil
	}, nil)
	defer hs.Close()
	results := make(chan int, 8)
	go func() {
		h, _ := hs.Get(s)
		results <- h
	}()
	<-entered // the first Get is inside create: the others must wait for it
	var wg sync.WaitGroup
	for range 7 {
		wg.Go(func() {
			h, err := hs.Get(s)
			if err != nil {
				t.Error(err)
			}
			results <- h
		})
	}
	close(release)
	wg.Wait()
	for range 8 {
		if h := <-results; h != 42 {
			t.Errorf("Get = %d, want 42", h)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("create ran %d times, want 1", n)
	}
}

func TestHandlesCreatePanics(t *testing.T) {
	dev, _ := drivertest.OpenDevice(t, "sim", simDSN)
	s := dev.DefaultStream()
	var calls atomic.Int32
	hs := evpool.NewHandles(func(driver.Stream) (string, error) {
		if calls.Add(1) == 1 {
			panic("library crashed")
		}
		return "ok", nil
	}, nil)
	defer hs.Close()
	func() {
		defer func() {
			if recover() == nil {
				t.Errorf("Get swallowed create's panic")
			}
		}()
		hs.Get(s)
	}()
	if h, err := hs.Get(s); err != nil || h != "ok" {
		t.Fatalf("Get after a panicking create = %q, %v; want a retry that succeeds", h, err)
	}
}

func TestHandlesCloseErrors(t *testing.T) {
	dev, _ := drivertest.OpenDevice(t, "sim", simDSN)
	ss := newStreams(t, dev, 3)
	errBusy := errors.New("busy")
	hs := evpool.NewHandles(func(s driver.Stream) (uint64, error) { return s.ID(), nil },
		func(id uint64) error {
			if id == ss[1].ID() {
				return errBusy
			}
			return nil
		})
	for _, s := range ss {
		if _, err := hs.Get(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := hs.Close(); !errors.Is(err, errBusy) {
		t.Fatalf("Close = %v, want the destroy error", err)
	}
	if _, err := hs.Get(nil); !errors.Is(err, driver.ErrInvalidValue) {
		t.Fatalf("Get(nil) = %v, want driver.ErrInvalidValue", err)
	}
}

// TestHandlesCloseDuringGets races Close against many Gets: every handle
// made is destroyed exactly once, and a Get either succeeds (it finished
// before Close) or fails with ErrClosed.
func TestHandlesCloseDuringGets(t *testing.T) {
	for round := range 5 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			dev, _ := drivertest.OpenDevice(t, "sim", simDSN)
			ss := newStreams(t, dev, 8)
			log := &handleLog{}
			hs := evpool.NewHandles(log.create, log.destroy)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for w := range 8 {
				wg.Go(func() {
					<-start
					for i := range 40 {
						_, err := hs.Get(ss[(w*3+i)%len(ss)])
						if err != nil && !errors.Is(err, driver.ErrClosed) {
							t.Error(err)
						}
					}
				})
			}
			close(start)
			if err := hs.Close(); err != nil {
				t.Error(err)
			}
			wg.Wait()
			for _, h := range log.all {
				if n := h.destroyed.Load(); n != 1 {
					t.Errorf("handle of stream %d destroyed %d times, want once", h.stream, n)
				}
			}
		})
	}
}
