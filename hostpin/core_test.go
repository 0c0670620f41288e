package hostpin

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/sim"
)

// TestCloseConcurrent: goroutines allocate, copy on streams, record, free,
// poll, read stats and empty the cache while two goroutines Close at once.
// Both Closes return nil; every goroutine stops at ErrClosed, finds the
// buffers it kept across Close unchanged and frees them (with their streams)
// afterwards; in the end nothing is in use, pending or cached, and every
// driver allocation has been freed.
func TestCloseConcurrent(t *testing.T) {
	eachResource(t, func(t *testing.T, dev driver.Device, sd *sim.Device, r resource) {
		base := sd.Stats()
		streams := []driver.Stream{newStream(t, dev), newStream(t, dev), nil}
		sizes := []int{1, 3000, 9000, 70 << 10, 300 << 10, 1 << 20}
		const workers = 6
		var wg sync.WaitGroup
		errc := make(chan error, workers+2)
		for g := range workers {
			dptr := devMalloc(t, dev, 1<<20)
			wg.Go(func() {
				type kept struct {
					b   *Buffer
					tag byte
				}
				var held []kept
				for i := 0; i < 1_000_000; i++ {
					n := sizes[(g+i)%len(sizes)]
					b, err := r.Alloc(n)
					if errors.Is(err, ErrClosed) {
						break
					}
					if err != nil {
						errc <- fmt.Errorf("goroutine %d: Alloc(%d): %w", g, n, err)
						return
					}
					tag := byte(g*37+i) | 1
					b.Bytes()[0], b.Bytes()[n-1] = tag, tag
					if i%2 == 0 {
						s := streams[i%len(streams)]
						if err := dev.CopyHtoD(dptr, b.Bytes(), s); err != nil {
							errc <- err
							return
						}
						if err := r.RecordStream(b, s); err != nil {
							errc <- err
							return
						}
					}
					if i%5 == 0 {
						held = append(held, kept{b, tag})
						continue
					}
					if err := r.Free(b); err != nil {
						errc <- fmt.Errorf("goroutine %d: Free: %w", g, err)
						return
					}
					switch i % 7 {
					case 1:
						r.Poll()
					case 3:
						_ = r.Stats()
					case 5:
						if c, ok := r.(interface{ EmptyCache() error }); ok {
							if err := c.EmptyCache(); err != nil {
								errc <- err
								return
							}
						}
					}
				}
				for _, k := range held {
					m := k.b.Bytes()
					if m[0] != k.tag || m[len(m)-1] != k.tag {
						errc <- fmt.Errorf("goroutine %d: a buffer kept across Close changed", g)
						return
					}
					if err := r.Free(k.b); err != nil {
						errc <- fmt.Errorf("goroutine %d: Free after Close: %w", g, err)
						return
					}
				}
			})
		}
		for range 2 {
			wg.Go(func() {
				for r.Stats().Requests < 300 { // let the workers get going
					runtime.Gosched()
				}
				if err := r.Close(); err != nil {
					errc <- fmt.Errorf("Close: %w", err)
				}
			})
		}
		wg.Wait()
		close(errc)
		for err := range errc {
			t.Error(err)
		}
		if _, err := r.Alloc(10); !errors.Is(err, driver.ErrClosed) {
			t.Errorf("Alloc after Close = %v, want an error wrapping driver.ErrClosed", err)
		}
		s := r.Stats()
		if s.BytesInUse != 0 || s.BytesPending != 0 || s.BytesCached != 0 || s.BytesReserved != 0 {
			t.Errorf("after Close and the last Free: %+v", s)
		}
		d := sd.Stats()
		if allocs, frees := d.HostAllocs-base.HostAllocs, d.HostFrees-base.HostFrees; allocs != frees {
			t.Errorf("after Close and the last Free: %d driver allocations, %d frees", allocs, frees)
		}
	})
}
