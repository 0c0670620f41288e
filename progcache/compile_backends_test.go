package progcache_test

// GetOrCompile on every backend, the bolt package's included (an external
// test, so it can import progcache/bolt).

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/accelkit/accelkit/progcache"
	"github.com/accelkit/accelkit/progcache/bolt"
	"github.com/accelkit/accelkit/progcache/cachetest"
	"github.com/accelkit/accelkit/progcache/filestream"
)

// caches returns one fresh cache of each backend, each with its Group.
func caches(t *testing.T, maxBytes int64) map[string]progcache.Grouped {
	m, err := progcache.NewMemory(progcache.MemoryOptions{MaxBytes: maxBytes})
	if err != nil {
		t.Fatal(err)
	}
	fsc, err := filestream.Open(t.TempDir(), filestream.Options{MaxBytes: maxBytes})
	if err != nil {
		t.Fatal(err)
	}
	b, err := bolt.Open(filepath.Join(t.TempDir(), "c.db"), bolt.Options{MaxBytes: maxBytes, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	cs := map[string]progcache.Grouped{"memory": m, "filestream": fsc, "bolt": b}
	for _, c := range cs {
		t.Cleanup(func() { c.Close() })
	}
	return cs
}

func TestGetOrCompileOnce(t *testing.T) {
	for name, c := range caches(t, 0) {
		t.Run(name, func(t *testing.T) {
			const callers = 32
			fg := c.Group()
			if c.Group() != fg {
				t.Fatal("Group must return the same Group on every call")
			}
			allWaiting := make(chan struct{})
			var waiting atomic.Int32
			progcache.SetGroupWaiting(fg, func(progcache.Key) {
				if waiting.Add(1) == callers-1 {
					close(allWaiting)
				}
			})
			var compiles atomic.Int32
			compile := func(ctx context.Context) (progcache.Object, error) {
				compiles.Add(1)
				<-allWaiting // every other caller is waiting on this flight
				return cachetest.ObjectN(7, 5000), nil
			}
			var wg sync.WaitGroup
			errs := make(chan error, callers)
			for range callers {
				wg.Go(func() {
					obj, err := progcache.GetOrCompile(context.Background(), c, cachetest.KeyN(7), compile)
					switch {
					case err != nil:
						errs <- fmt.Errorf("caller got err %w", err)
					case !obj.Equal(cachetest.ObjectN(7, 5000)):
						errs <- errors.New("caller got a wrong object")
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			if n := compiles.Load(); n != 1 {
				t.Fatalf("%d compiles for %d concurrent callers, want 1", n, callers)
			}
			if _, ok, _ := c.Get(context.Background(), cachetest.KeyN(7)); !ok {
				t.Error("the compiled object must be stored")
			}
		})
	}
}

func TestGetOrCompileErrorsNotCached(t *testing.T) {
	for name, c := range caches(t, 0) {
		t.Run(name, func(t *testing.T) {
			boom := errors.New("compile failed")
			calls := 0
			compile := func(ctx context.Context) (progcache.Object, error) {
				calls++
				if calls == 1 {
					return progcache.Object{}, boom
				}
				return cachetest.ObjectN(1, 10), nil
			}
			if _, err := progcache.GetOrCompile(context.Background(), c, cachetest.KeyN(1), compile); !errors.Is(err, boom) {
				t.Fatalf("first call = %v, want the compile error", err)
			}
			if obj, err := progcache.GetOrCompile(context.Background(), c, cachetest.KeyN(1), compile); err != nil || !obj.Equal(cachetest.ObjectN(1, 10)) {
				t.Fatalf("second call = %v; errors must not be cached", err)
			}
			if calls != 2 {
				t.Errorf("%d compiles, want 2", calls)
			}
		})
	}
}

func TestGetOrCompileTooLarge(t *testing.T) {
	for name, c := range caches(t, 1000) {
		t.Run(name, func(t *testing.T) {
			big := cachetest.ObjectN(1, 4000)
			obj, err := progcache.GetOrCompile(context.Background(), c, cachetest.KeyN(1), func(context.Context) (progcache.Object, error) { return big, nil })
			if err != nil || !obj.Equal(big) {
				t.Fatalf("progcache.GetOrCompile of an object over the cap = %v; it must return the object", err)
			}
			if c.Stats().TooLarge != 1 {
				t.Errorf("TooLarge = %d, want 1", c.Stats().TooLarge)
			}
		})
	}
}
