package hostpin

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/drivertest"
)

// newAlloc makes an allocator closed at the end of the test (before the
// driver, as cleanups run last first).
func newAlloc(t testing.TB, dev driver.Device, opts Options) *Allocator {
	t.Helper()
	a, err := New(dev, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := a.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return a
}

func mustAlloc(t testing.TB, a *Allocator, n int) *Buffer {
	t.Helper()
	b, err := a.Alloc(n)
	if err != nil {
		t.Fatalf("Alloc(%d): %v", n, err)
	}
	if b.Len() != n || len(b.Bytes()) != n {
		t.Fatalf("Alloc(%d): Len %d, len(Bytes) %d", n, b.Len(), len(b.Bytes()))
	}
	return b
}

func mustFree(t testing.TB, a *Allocator, b *Buffer) {
	t.Helper()
	if err := a.Free(b); err != nil {
		t.Fatalf("Free: %v", err)
	}
}

func addr(b *Buffer) uintptr {
	if b.blk == nil {
		return 0
	}
	return uintptr(unsafe.Pointer(unsafe.SliceData(b.blk.mem)))
}

func TestNewOptions(t *testing.T) {
	dev, _ := drivertest.OpenDevice(t, "sim", "")
	tests := []struct {
		name string
		opts Options
		ok   bool
	}{
		{"zero", Options{}, true},
		{"per doubling 8", Options{ClassesPerDoubling: 8}, true},
		{"per doubling 3", Options{ClassesPerDoubling: 3}, false},
		{"per doubling 32", Options{ClassesPerDoubling: 32}, false},
		{"per doubling negative", Options{ClassesPerDoubling: -4}, false},
		{"negative cap", Options{CacheCap: -1}, false},
		{"negative threshold", Options{PageOnlyThreshold: -1}, false},
		{"negative max", Options{MaxSize: -1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := New(dev, tt.opts)
			if tt.ok != (err == nil) {
				t.Fatalf("New(%+v) error %v, want ok=%v", tt.opts, err, tt.ok)
			}
			if err != nil {
				if !errors.Is(err, driver.ErrInvalidValue) {
					t.Errorf("error %v does not match driver.ErrInvalidValue", err)
				}
				return
			}
			a.Close()
		})
	}
	a := newAlloc(t, dev, Options{})
	o := a.Options()
	if o.ClassesPerDoubling != 4 || o.CacheCap != 2<<30 || o.PageOnlyThreshold != 64<<20 || o.MaxSize != 1<<40 {
		t.Errorf("defaults = %+v", o)
	}
	if _, err := New(nil, Options{}); !errors.Is(err, driver.ErrInvalidValue) {
		t.Errorf("New(nil) = %v, want ErrInvalidValue", err)
	}
}

func TestAllocZero(t *testing.T) {
	dev, sd := drivertest.OpenDevice(t, "sim", "")
	a := newAlloc(t, dev, Options{})
	before := sd.Stats().HostAllocs
	b := mustAlloc(t, a, 0)
	if b.Cap() != 0 || b.Bytes() != nil {
		t.Errorf("empty buffer: Cap %d, Bytes %v", b.Cap(), b.Bytes())
	}
	if err := a.RecordStream(b, dev.DefaultStream()); err != nil {
		t.Errorf("RecordStream(empty): %v", err)
	}
	mustFree(t, a, b)
	if err := a.Free(b); !errors.Is(err, ErrDoubleFree) {
		t.Errorf("second Free of empty buffer = %v, want ErrDoubleFree", err)
	}
	if got := sd.Stats().HostAllocs - before; got != 0 {
		t.Errorf("size 0 made %d driver allocations, want 0", got)
	}
	if st := a.Stats(); st.Requests != 1 || st.DriverAllocs != 0 {
		t.Errorf("stats after size 0: %+v", st)
	}
}

func TestAllocReuse(t *testing.T) {
	dev, sd := drivertest.OpenDevice(t, "sim", "")
	a := newAlloc(t, dev, Options{})
	for _, n := range []int{1, 4096, 5000, 63 << 10, 64 << 10, 1 << 20, 3<<20 + 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			b := mustAlloc(t, a, n)
			if b.Cap() != a.RoundedSize(n) {
				t.Errorf("fresh Alloc(%d).Cap() = %d, want RoundedSize %d", n, b.Cap(), a.RoundedSize(n))
			}
			for i := range b.Bytes() {
				b.Bytes()[i] = byte(i)
			}
			p := addr(b)
			mustFree(t, a, b)
			allocs := sd.Stats().HostAllocs
			hits := a.Stats().Hits
			b2 := mustAlloc(t, a, n)
			if addr(b2) != p {
				t.Errorf("second Alloc(%d) did not reuse the freed buffer", n)
			}
			if sd.Stats().HostAllocs != allocs || a.Stats().Hits != hits+1 {
				t.Errorf("second Alloc(%d) was not a cache hit", n)
			}
			mustFree(t, a, b2)
		})
	}
}

// TestReuseRatio checks that a cached larger buffer serves a request up to
// 1.25x smaller, and not one smaller than that.
func TestReuseRatio(t *testing.T) {
	dev, _ := drivertest.OpenDevice(t, "sim", "")
	a := newAlloc(t, dev, Options{PageOnlyThreshold: 1 << 20})
	tests := []struct {
		name      string
		cached, n int
		reuse     bool
	}{
		{"class 96K serves 80K", 96 << 10, 80 << 10, true},
		{"class 96K refuses 76K", 96 << 10, 76 << 10, false},
		{"slab 6K serves 5K", 6 << 10, 5 << 10, true},
		{"slab 6K refuses 4.5K", 6 << 10, 4608, false},
		{"page-only serves 1.2x smaller", 1<<20 + 300<<10, 1<<20 + 40<<10, true},
		{"page-only refuses 1.3x smaller", 1<<20 + 400<<10, 1<<20 + 40<<10, false},
		{"page-only serves same", 1<<20 + 1, 1<<20 + 1, true},
		{"smaller never serves larger", 64 << 10, 65 << 10, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := a.EmptyCache(); err != nil {
				t.Fatal(err)
			}
			big := mustAlloc(t, a, tt.cached)
			p := addr(big)
			mustFree(t, a, big)
			b := mustAlloc(t, a, tt.n)
			defer mustFree(t, a, b)
			if got := addr(b) == p; got != tt.reuse {
				t.Errorf("Alloc(%d) after freeing %d: reused %v, want %v (Cap %d)", tt.n, tt.cached, got, tt.reuse, b.Cap())
			}
			if r := float64(b.Cap()) / float64(tt.n); r > 1.25 {
				t.Errorf("Alloc(%d) handed out %d bytes: %.3fx", tt.n, b.Cap(), r)
			}
		})
	}
}

func TestSlabs(t *testing.T) {
	dev, sd := drivertest.OpenDevice(t, "sim", "")
	a := newAlloc(t, dev, Options{})
	base := sd.Stats()
	var bufs []*Buffer
	for i := 0; i < 256; i++ { // 256 x 4 KiB fill one 1 MiB slab
		b := mustAlloc(t, a, 4096)
		for j := range b.Bytes() {
			b.Bytes()[j] = byte(i)
		}
		bufs = append(bufs, b)
	}
	if got := sd.Stats().HostAllocs - base.HostAllocs; got != 1 {
		t.Errorf("256 x 4 KiB made %d driver allocations, want 1 slab", got)
	}
	for i, b := range bufs {
		if !bytes.Equal(b.Bytes(), bytes.Repeat([]byte{byte(i)}, 4096)) {
			t.Fatalf("slab piece %d overwritten by a neighbour", i)
		}
	}
	extra := mustAlloc(t, a, 4096) // the 257th needs a second slab
	if got := sd.Stats().HostAllocs - base.HostAllocs; got != 2 {
		t.Errorf("257 x 4 KiB made %d driver allocations, want 2", got)
	}
	// A slab with a piece in use stays on EmptyCache.
	for _, b := range bufs[1:] {
		mustFree(t, a, b)
	}
	mustFree(t, a, extra)
	if err := a.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	st := a.Stats()
	if got := sd.Stats().HostFrees - base.HostFrees; got != 1 || st.BytesReserved != slabSize {
		t.Errorf("EmptyCache with one piece in use: %d driver frees, %d bytes reserved; want 1 and one slab", got, st.BytesReserved)
	}
	mustFree(t, a, bufs[0])
	if err := a.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	st = a.Stats()
	if got := sd.Stats().HostFrees - base.HostFrees; got != 2 || st.BytesReserved != 0 || st.BytesCached != 0 {
		t.Errorf("EmptyCache with slabs idle: %d driver frees, %+v", got, st)
	}
}

func TestCacheCap(t *testing.T) {
	dev, _ := drivertest.OpenDevice(t, "sim", "")
	a := newAlloc(t, dev, Options{CacheCap: 1 << 20})
	b1, b2, b3 := mustAlloc(t, a, 512<<10), mustAlloc(t, a, 512<<10), mustAlloc(t, a, 512<<10)
	p2, p3 := addr(b2), addr(b3)
	mustFree(t, a, b1)
	mustFree(t, a, b2)
	if st := a.Stats(); st.Evictions != 0 || st.BytesCached != 1<<20 {
		t.Fatalf("at the cap: %+v", st)
	}
	mustFree(t, a, b3) // over the cap: b1, the oldest, goes
	st := a.Stats()
	if st.Evictions != 1 || st.BytesCached != 1<<20 || st.BytesReserved != 1<<20 || st.DriverFrees != 1 {
		t.Fatalf("over the cap: %+v", st)
	}
	c1, c2 := mustAlloc(t, a, 512<<10), mustAlloc(t, a, 512<<10)
	if got := map[uintptr]bool{addr(c1): true, addr(c2): true}; !got[p2] || !got[p3] {
		t.Errorf("after eviction the cache did not hold the two newest buffers")
	}
	mustFree(t, a, c1)
	mustFree(t, a, c2)

	// A buffer larger than the cap is not kept.
	big := mustAlloc(t, a, 2<<20)
	mustFree(t, a, big)
	if st := a.Stats(); st.BytesCached > 1<<20 {
		t.Errorf("cached %d bytes above the 1 MiB cap", st.BytesCached)
	}

	if err := a.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	if st := a.Stats(); st.BytesCached != 0 || st.BytesReserved != 0 || st.DriverAllocs != st.DriverFrees {
		t.Errorf("after EmptyCache: %+v", st)
	}
}

func TestBadInput(t *testing.T) {
	dev, _ := drivertest.OpenDevice(t, "sim", "")
	a := newAlloc(t, dev, Options{MaxSize: 1 << 30})
	other := newAlloc(t, dev, Options{})
	keep := mustAlloc(t, a, 8192)
	copy(keep.Bytes(), bytes.Repeat([]byte{0xAB}, 8192))
	freed := mustAlloc(t, a, 8192)
	mustFree(t, a, freed)
	foreign := mustAlloc(t, other, 8192)
	defer mustFree(t, other, foreign)

	before := a.Stats()
	tests := []struct {
		name string
		call func() error
		want []error
	}{
		{"negative size", func() error { _, err := a.Alloc(-1); return err }, []error{ErrInvalidSize, driver.ErrInvalidValue}},
		{"size above MaxSize", func() error { _, err := a.Alloc(1<<30 + 1); return err }, []error{ErrInvalidSize, driver.ErrInvalidValue}},
		{"double free", func() error { return a.Free(freed) }, []error{ErrDoubleFree}},
		{"foreign free", func() error { return a.Free(foreign) }, []error{ErrForeignBuffer}},
		{"nil free", func() error { return a.Free(nil) }, []error{ErrNilBuffer}},
		{"record after free", func() error { return a.RecordStream(freed, dev.DefaultStream()) }, []error{ErrDoubleFree}},
		{"record foreign", func() error { return a.RecordStream(foreign, dev.DefaultStream()) }, []error{ErrForeignBuffer}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !errors.Is(err, w) {
					t.Errorf("error %q does not match %q", err, w)
				}
			}
			if n := strings.Count(err.Error(), "hostpin:"); n != 1 {
				t.Errorf("error %q names the package %d times, want once", err, n)
			}
		})
	}
	if after := a.Stats(); after != before {
		t.Errorf("bad input changed the stats:\nbefore %+v\nafter  %+v", before, after)
	}
	// Nothing corrupted: the freed buffer is handed out once, the live one
	// is untouched.
	b1 := mustAlloc(t, a, 8192)
	b2 := mustAlloc(t, a, 8192)
	if addr(b1) == addr(b2) || addr(b1) == addr(keep) || addr(b2) == addr(keep) {
		t.Error("a buffer was handed out twice after a double free")
	}
	if !bytes.Equal(keep.Bytes(), bytes.Repeat([]byte{0xAB}, 8192)) {
		t.Error("live buffer changed")
	}
	mustFree(t, a, b1)
	mustFree(t, a, b2)
	mustFree(t, a, keep)
}

// TestRecordStreamReuse: a copy held on a gated stream reads a buffer freed
// with RecordStream; the buffer is not handed out again until the gate is
// open and the copy has run, and the copy reads what was written before
// Free.
func TestRecordStreamReuse(t *testing.T) {
	dev, sd := drivertest.OpenDevice(t, "sim", "")
	a := newAlloc(t, dev, Options{})
	const n = 1 << 20
	st, err := dev.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	dptr, err := dev.Malloc(n)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Free(dptr)
	open, err := sd.Gate(st)
	if err != nil {
		t.Fatal(err)
	}
	b := mustAlloc(t, a, n)
	want := bytes.Repeat([]byte("pinned!"), n/7+1)[:n]
	copy(b.Bytes(), want)
	p := addr(b)
	if err := dev.CopyHtoD(dptr, b.Bytes(), st); err != nil {
		t.Fatal(err)
	}
	if err := a.RecordStream(b, st); err != nil {
		t.Fatal(err)
	}
	if err := a.RecordStream(b, st); err != nil { // twice is harmless
		t.Fatal(err)
	}
	mustFree(t, a, b)
	if st := a.Stats(); st.BytesPending != n {
		t.Errorf("BytesPending = %d, want %d", st.BytesPending, n)
	}
	var others []*Buffer
	for i := 0; i < 4; i++ {
		o := mustAlloc(t, a, n)
		if addr(o) == p {
			t.Fatal("buffer handed out while its stream's copy was gated")
		}
		for j := range o.Bytes() {
			o.Bytes()[j] = 0xEE // what a reuser would write
		}
		others = append(others, o)
	}
	if a.Poll() != 0 {
		t.Error("Poll completed a free whose stream is gated")
	}
	open()
	if err := st.Synchronize(); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, n)
	if err := dev.CopyDtoHSync(got, dptr); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the gated copy read memory reused before it ran")
	}
	b2 := mustAlloc(t, a, n)
	if addr(b2) != p {
		t.Error("buffer not reused once its stream's copy completed")
	}
	mustFree(t, a, b2)
	for _, o := range others {
		mustFree(t, a, o)
	}
	if st := a.Stats(); st.BytesPending != 0 || st.BytesInUse != 0 {
		t.Errorf("stats at the end: %+v", st)
	}
}

func TestClose(t *testing.T) {
	dev, sd := drivertest.OpenDevice(t, "sim", "")
	a, err := New(dev, Options{})
	if err != nil {
		t.Fatal(err)
	}
	base := sd.Stats()
	live := mustAlloc(t, a, 1<<20)
	want := pattern(1<<20, 3)
	copy(live.Bytes(), want)
	small := mustAlloc(t, a, 4096)
	mustFree(t, a, mustAlloc(t, a, 2<<20))
	// A free still waiting for a copy queued on a stream: Close drains it.
	st := newStream(t, dev)
	dptr := devMalloc(t, dev, 8<<20)
	queued := mustAlloc(t, a, 8<<20)
	if err := dev.CopyHtoD(dptr, queued.Bytes(), st); err != nil {
		t.Fatal(err)
	}
	if err := a.RecordStream(queued, st); err != nil {
		t.Fatal(err)
	}
	mustFree(t, a, queued)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	// Left: the live buffer and the slab of the small one, whose other
	// pieces stay cached until it comes back.
	if s := a.Stats(); s.BytesPending != 0 || s.BytesCached != slabSize-4096 || s.BytesReserved != 1<<20+slabSize {
		t.Errorf("after Close: %+v; want nothing pending, only the live buffer and the small one's slab reserved", s)
	}
	if _, err := a.Alloc(10); !errors.Is(err, ErrClosed) || !errors.Is(err, driver.ErrClosed) {
		t.Errorf("Alloc after Close = %v, want ErrClosed wrapping driver.ErrClosed", err)
	}
	if !bytes.Equal(live.Bytes(), want) {
		t.Error("Close changed a live buffer")
	}
	// Free after Close, with a recorded stream: the memory goes to the driver.
	if err := a.RecordStream(live, st); err != nil {
		t.Fatal(err)
	}
	mustFree(t, a, live)
	mustFree(t, a, small)
	s := sd.Stats()
	if s.HostAllocs-base.HostAllocs != s.HostFrees-base.HostFrees {
		t.Errorf("after Close and Free: %d driver allocs, %d frees", s.HostAllocs-base.HostAllocs, s.HostFrees-base.HostFrees)
	}
	if st := a.Stats(); st.BytesReserved != 0 || st.BytesInUse != 0 || st.BytesPending != 0 {
		t.Errorf("after Close and Free: %+v", st)
	}
	if err := a.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestStats(t *testing.T) {
	dev, _ := drivertest.OpenDevice(t, "sim", "")
	a := newAlloc(t, dev, Options{})
	b1 := mustAlloc(t, a, 100<<10) // class 112K
	b2 := mustAlloc(t, a, 1<<20)
	mustFree(t, a, b1)
	b3 := mustAlloc(t, a, 100<<10)
	st := a.Stats()
	want := Stats{Requests: 3, Hits: 1, Misses: 2, BytesInUse: 112<<10 + 1<<20, BytesReserved: 112<<10 + 1<<20,
		PeakInUse: 112<<10 + 1<<20, PeakReserved: 112<<10 + 1<<20, DriverAllocs: 2,
		// b1, b2 and b3 handed out, b1 returned; two driver allocations.
		ActiveBuffers: 2, PeakActiveBuffers: 2, PeakActiveBytes: 112<<10 + 1<<20,
		BuffersHandedOut: 3, BytesHandedOut: 2*112<<10 + 1<<20, BuffersReturned: 1, BytesReturned: 112 << 10,
		UnitsReserved: 2, PeakUnitsReserved: 2, DriverAllocBytes: 112<<10 + 1<<20}
	got := st
	got.DriverAllocTime, got.DriverAllocMax, got.DriverFreeTime, got.DriverFreeMax = 0, 0, 0, 0
	got.DriverAllocMin, got.DriverFreeMin = 0, 0
	if got != want {
		t.Errorf("stats:\n got %+v\nwant %+v", got, want)
	}
	if st.DriverAllocTime <= 0 || st.DriverAllocMax <= 0 || st.DriverAllocMax > st.DriverAllocTime ||
		st.DriverAllocMin <= 0 || st.DriverAllocMin > st.DriverAllocMax {
		t.Errorf("alloc times: total %v, max %v, min %v", st.DriverAllocTime, st.DriverAllocMax, st.DriverAllocMin)
	}
	mustFree(t, a, b2)
	mustFree(t, a, b3)
	if err := a.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	st = a.Stats()
	if st.DriverFrees != 2 || st.DriverFreeTime <= 0 || st.DriverFreeMax <= 0 || st.PeakInUse != 112<<10+1<<20 || st.BytesInUse != 0 {
		t.Errorf("after EmptyCache: %+v", st)
	}
}

// TestConcurrentAllocFree churns the allocator from many goroutines; every
// goroutine checks its buffers were not handed to anyone else meanwhile.
func TestConcurrentAllocFree(t *testing.T) {
	dev, _ := drivertest.OpenDevice(t, "sim", "")
	a := newAlloc(t, dev, Options{CacheCap: 8 << 20})
	st, err := dev.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	sizes := []int{1, 4096, 5000, 9000, 60 << 10, 70 << 10, 300 << 10, 1 << 20, 3 << 20}
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Go(func() {
			for i := 0; i < 200; i++ {
				n := sizes[(g+i)%len(sizes)]
				b, err := a.Alloc(n)
				if err != nil {
					errc <- err
					return
				}
				tag := byte(g*31 + i)
				mem := b.Bytes()
				for j := 0; j < len(mem); j += 512 {
					mem[j] = tag
				}
				if i%3 == 0 {
					if err := a.RecordStream(b, st); err != nil {
						errc <- err
						return
					}
				}
				for j := 0; j < len(mem); j += 512 {
					if mem[j] != tag {
						errc <- fmt.Errorf("goroutine %d: buffer of %d bytes changed under it", g, n)
						return
					}
				}
				if err := a.Free(b); err != nil {
					errc <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	if err := st.Synchronize(); err != nil {
		t.Fatal(err)
	}
	a.Poll()
	s := a.Stats()
	if s.BytesInUse != 0 || s.BytesPending != 0 || s.Requests != 1600 || s.Hits+s.Misses != 1600 {
		t.Errorf("stats after churn: %+v", s)
	}
}

// TestFaultInjection runs allocations with a driver that fails 30% of
// calls: errors surface as out of memory, and the allocator's accounting and
// buffers stay consistent.
func TestFaultInjection(t *testing.T) {
	dev, sd := drivertest.OpenDevice(t, "sim", "")
	a := newAlloc(t, dev, Options{CacheCap: 4 << 20})
	st, err := dev.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	sd.SetFaultRate(7, 0.3)
	var live []*Buffer
	failures := 0
	for i := 0; i < 400; i++ {
		n := []int{3000, 20 << 10, 100 << 10, 700 << 10, 2 << 20}[i%5]
		b, err := a.Alloc(n)
		if err != nil {
			if !errors.Is(err, driver.ErrOutOfMemory) {
				t.Fatalf("Alloc(%d) error %v does not match ErrOutOfMemory", n, err)
			}
			failures++
			continue
		}
		copy(b.Bytes(), bytes.Repeat([]byte{byte(i)}, n))
		live = append(live, b)
		if i%2 == 0 {
			a.RecordStream(b, st) // may fail to record at Free; Free then waits
		}
		if len(live) > 6 {
			victim := live[0]
			live = live[1:]
			if err := a.Free(victim); err != nil {
				t.Fatalf("Free: %v", err)
			}
		}
		if i%37 == 0 {
			a.EmptyCache()
		}
		for k, b := range live {
			if b.Bytes()[0] != b.Bytes()[len(b.Bytes())-1] {
				t.Fatalf("live buffer %d overwritten", k)
			}
		}
	}
	sd.SetFaultRate(0, 0)
	if failures == 0 {
		t.Fatal("fault injection caused no failures")
	}
	for _, b := range live {
		mustFree(t, a, b)
	}
	if err := st.Synchronize(); err != nil {
		t.Fatal(err)
	}
	a.Poll()
	s := a.Stats()
	if s.BytesInUse != 0 || s.BytesPending != 0 || s.Hits+s.Misses != s.Requests {
		t.Errorf("stats after faults: %+v", s)
	}
	if err := a.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	if s := a.Stats(); s.BytesReserved != 0 || s.BytesCached != 0 {
		t.Errorf("after EmptyCache: %+v", s)
	}
	t.Logf("%d of 400 allocations failed by injection", failures)
}
