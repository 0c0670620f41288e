package hostpin

import (
	"bytes"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/drivertest"
	"github.com/accelkit/accelkit/driver/sim"
	"github.com/accelkit/accelkit/evpool"
)

// resource is what the tests drive on both an Allocator and a Direct.
type resource interface {
	Device() driver.Device
	Alloc(size int) (*Buffer, error)
	RecordStream(b *Buffer, s driver.Stream) error
	Free(b *Buffer) error
	Poll() int
	Stats() Stats
	Close() error
}

// eachResource runs f on a fresh device with an Allocator and with a
// Direct, each closed at the end of its subtest.
func eachResource(t *testing.T, f func(t *testing.T, dev driver.Device, sd *sim.Device, r resource)) {
	for _, kind := range []string{"Allocator", "Direct"} {
		t.Run(kind, func(t *testing.T) {
			dev, sd := drivertest.OpenDevice(t, "sim", "")
			var r resource
			if kind == "Allocator" {
				r = newAlloc(t, dev, Options{})
			} else {
				r = newDirect(t, dev, DirectOptions{})
			}
			f(t, dev, sd, r)
		})
	}
}

// TestFreeRecordFailure: when the free-time events cannot be recorded, Free
// waits for the stream; the buffer is then reusable.
func TestFreeRecordFailure(t *testing.T) {
	dev, sd := drivertest.OpenDevice(t, "sim", "")
	a := newAlloc(t, dev, Options{})
	st, err := dev.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	b := mustAlloc(t, a, 64<<10)
	if err := a.RecordStream(b, st); err != nil {
		t.Fatal(err)
	}
	sd.SetFaultRate(1, 1) // every record fails
	err = a.Free(b)
	sd.SetFaultRate(0, 0)
	if err != nil {
		t.Fatalf("Free with failing records: %v (want the stream waited for instead)", err)
	}
	if s := a.Stats(); s.BytesCached != 64<<10 || s.BytesPending != 0 {
		t.Errorf("after Free: %+v", s)
	}
}

// TestFreeRecordFailureGated: events cannot be recorded and the buffer's
// stream is gated, so Free waits on the host for the stream. Meanwhile the
// buffer is not handed out (cache hits get other buffers, and a miss fails
// rather than return it), Free does not return, and once the gate opens Free
// succeeds and the buffer is reused.
func TestFreeRecordFailureGated(t *testing.T) {
	dev, sd := drivertest.OpenDevice(t, "sim", "")
	a := newAlloc(t, dev, Options{})
	const n = 256 << 10
	st := newStream(t, dev)
	dptr := devMalloc(t, dev, n)
	// Idle buffers of the class, so the Allocs below hit the cache: the
	// fault rate fails driver allocations too.
	spare := []*Buffer{mustAlloc(t, a, n), mustAlloc(t, a, n)}
	b := mustAlloc(t, a, n)
	want := pattern(n, 9)
	copy(b.Bytes(), want)
	p := addr(b)
	for _, s := range spare {
		mustFree(t, a, s)
	}
	open, err := sd.Gate(st)
	if err != nil {
		t.Fatal(err)
	}
	defer open()
	if err := dev.CopyHtoD(dptr, b.Bytes(), st); err != nil { // reads b once the gate opens
		t.Fatal(err)
	}
	if err := a.RecordStream(b, st); err != nil {
		t.Fatal(err)
	}
	sd.SetFaultRate(1, 1) // every event record (and NewEvent, HostAlloc) fails
	defer sd.SetFaultRate(0, 0)
	freed := make(chan error, 1)
	go func() { freed <- a.Free(b) }()
	for a.Stats().BytesPending != n { // Free has begun
		runtime.Gosched()
	}
	var others []*Buffer
	for range spare {
		o := mustAlloc(t, a, n)
		if addr(o) == p {
			t.Fatal("a buffer was handed out while Free waited for its gated stream")
		}
		for i := range o.Bytes() {
			o.Bytes()[i] = 0xEE // what a reuser would write
		}
		others = append(others, o)
	}
	if o, err := a.Alloc(n); err == nil {
		if addr(o) == p {
			t.Fatal("a buffer was handed out while Free waited for its gated stream")
		}
		others = append(others, o)
	}
	select {
	case err := <-freed:
		t.Fatalf("Free returned (%v) before its gated stream ran, with no event recorded", err)
	default:
	}
	open()
	if err := <-freed; err != nil {
		t.Fatalf("Free once the gate opened: %v", err)
	}
	sd.SetFaultRate(0, 0)
	if err := st.Synchronize(); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, n)
	if err := dev.CopyDtoHSync(got, dptr); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the gated copy read the buffer after it was reused")
	}
	if s := a.Stats(); s.BytesPending != 0 {
		t.Errorf("after Free: %+v", s)
	}
	again := mustAlloc(t, a, n)
	if addr(again) != p {
		t.Error("the buffer was not reusable once Free returned")
	}
	mustFree(t, a, again)
	for _, o := range others {
		mustFree(t, a, o)
	}
}

// TestFreeNotReleasedHandsBack: the buffer's stream has failed (so waiting
// for it fails, on the stream and on the device) and no event can be
// recorded. Free cannot show the stream's work over: it returns an error
// wrapping evpool.ErrNotReleased and changes nothing. The buffer is live and
// the caller's, with its streams, not reused; once events can be recorded
// again, freeing it again succeeds (an event on a failed stream reports the
// stream's error, which counts as its work being over).
func TestFreeNotReleasedHandsBack(t *testing.T) {
	eachResource(t, func(t *testing.T, dev driver.Device, sd *sim.Device, r resource) {
		const n = 128 << 10
		dptr := devMalloc(t, dev, n)
		b, err := r.Alloc(n)
		if err != nil {
			t.Fatal(err)
		}
		want := pattern(n, 17)
		copy(b.Bytes(), want)
		st := newStream(t, dev)
		sd.FailStream(st)
		if err := dev.CopyHtoD(dptr, b.Bytes(), st); err != nil { // fails when it runs
			t.Fatal(err)
		}
		if err := st.Synchronize(); !errors.Is(err, sim.ErrInjected) {
			t.Fatalf("the failed stream synchronized with %v", err)
		}
		if err := r.RecordStream(b, st); err != nil {
			t.Fatal(err)
		}
		before, drvBefore := r.Stats(), sd.Stats()

		sd.SetFaultRate(3, 1) // every event record fails
		err = r.Free(b)
		sd.SetFaultRate(0, 0)
		if !errors.Is(err, evpool.ErrNotReleased) || !strings.Contains(err.Error(), "still the caller's") {
			t.Fatalf("Free = %v, want evpool.ErrNotReleased saying the buffer is still the caller's", err)
		}
		if after := r.Stats(); after != before {
			t.Errorf("the failed Free changed the stats:\nbefore %+v\nafter  %+v", before, after)
		}
		if b.freed || !b.streams.Has(st) || b.blk.state != stateInUse {
			t.Errorf("the failed Free left freed=%v, streams %v, state %d; want live with its stream", b.freed, b.streams.IDs(), b.blk.state)
		}
		if got := sd.Stats().HostFrees - drvBefore.HostFrees; got != 0 {
			t.Errorf("the failed Free made %d driver frees", got)
		}
		if !bytes.Equal(b.Bytes(), want) {
			t.Error("the failed Free changed the buffer's contents")
		}
		o, err := r.Alloc(n)
		if err != nil {
			t.Fatal(err)
		}
		if addr(o) == addr(b) {
			t.Fatal("the buffer was handed out again after a failed Free")
		}
		if err := r.Free(o); err != nil {
			t.Fatal(err)
		}
		// Live again: the caller may record more streams and free it.
		if err := r.RecordStream(b, nil); err != nil {
			t.Fatalf("RecordStream after the failed Free: %v", err)
		}
		if err := r.Free(b); err != nil {
			t.Fatalf("Free again with events recordable: %v", err)
		}
		_ = st.Synchronize() // returns the stream's sticky error once its work is over
		if err := dev.DefaultStream().Synchronize(); err != nil {
			t.Fatal(err)
		}
		if got := r.Poll(); got != 1 {
			t.Errorf("Poll after the streams ran completed %d frees, want 1", got)
		}
		if s := r.Stats(); s.BytesInUse != 0 || s.BytesPending != 0 {
			t.Errorf("after the second Free: %+v", s)
		}
	})
}

// TestFreeLostDevice: after the device is lost nothing can show a stream's
// work over, and the device never recovers. Free hands the buffer back every
// time; it stays live, keeps its contents and is never handed out, and
// neither EmptyCache nor Close frees it under the caller.
func TestFreeLostDevice(t *testing.T) {
	eachResource(t, func(t *testing.T, dev driver.Device, sd *sim.Device, r resource) {
		const n = 128 << 10
		b, err := r.Alloc(n)
		if err != nil {
			t.Fatal(err)
		}
		idle, err := r.Alloc(n) // a cached buffer of the class, for the Allocator
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Free(idle); err != nil {
			t.Fatal(err)
		}
		want := pattern(n, 23)
		copy(b.Bytes(), want)
		st := newStream(t, dev)
		if err := r.RecordStream(b, st); err != nil {
			t.Fatal(err)
		}
		sd.LoseDevice()
		before := r.Stats()
		for i := range 2 {
			err := r.Free(b)
			if !errors.Is(err, evpool.ErrNotReleased) || !errors.Is(err, driver.ErrDeviceLost) {
				t.Fatalf("Free %d on a lost device = %v, want evpool.ErrNotReleased and driver.ErrDeviceLost", i+1, err)
			}
			if after := r.Stats(); after != before {
				t.Fatalf("Free %d on a lost device changed the stats:\nbefore %+v\nafter  %+v", i+1, before, after)
			}
		}
		if o, err := r.Alloc(n); err == nil {
			if addr(o) == addr(b) {
				t.Fatal("the buffer was handed out again on a lost device")
			}
		}
		if c, ok := r.(interface{ EmptyCache() error }); ok {
			_ = c.EmptyCache() // the driver's frees fail on a lost device
		}
		_ = r.Close() // likewise
		if b.freed || b.blk.state != stateInUse || !bytes.Equal(b.Bytes(), want) {
			t.Errorf("after EmptyCache and Close: freed=%v state=%d, contents kept %v; want live and unchanged", b.freed, b.blk.state, bytes.Equal(b.Bytes(), want))
		}
		if s := r.Stats(); s.BytesInUse < n {
			t.Errorf("after Close the buffer is no longer counted in use: %+v", s)
		}
		if err := r.Free(b); !errors.Is(err, evpool.ErrNotReleased) {
			t.Errorf("Free after Close on a lost device = %v, want evpool.ErrNotReleased", err)
		}
	})
}

// TestRecordStreamNil: a nil stream is the device's default stream, and
// recording it twice (as nil and by value) keeps it once. A buffer freed
// with it waits for the gated default stream.
func TestRecordStreamNil(t *testing.T) {
	eachResource(t, func(t *testing.T, dev driver.Device, sd *sim.Device, r resource) {
		const n = 64 << 10
		b, err := r.Alloc(n)
		if err != nil {
			t.Fatal(err)
		}
		p := addr(b)
		open, err := sd.Gate(dev.DefaultStream())
		if err != nil {
			t.Fatal(err)
		}
		defer open()
		for _, s := range []driver.Stream{nil, dev.DefaultStream(), nil} {
			if err := r.RecordStream(b, s); err != nil {
				t.Fatal(err)
			}
		}
		if b.streams.Len() != 1 || !b.streams.Has(dev.DefaultStream()) {
			t.Fatalf("recorded streams %v, want the default stream once", b.streams.IDs())
		}
		if err := r.Free(b); err != nil {
			t.Fatal(err)
		}
		if s := r.Stats(); s.BytesPending != n {
			t.Errorf("BytesPending %d while the default stream is gated, want %d", s.BytesPending, n)
		}
		o, err := r.Alloc(n)
		if err != nil {
			t.Fatal(err)
		}
		if addr(o) == p {
			t.Fatal("buffer handed out while the default stream was gated")
		}
		if r.Poll() != 0 {
			t.Error("Poll completed a free whose default stream is gated")
		}
		open()
		if err := dev.DefaultStream().Synchronize(); err != nil {
			t.Fatal(err)
		}
		if r.Poll() != 1 || r.Stats().BytesPending != 0 {
			t.Errorf("after the default stream ran: %+v", r.Stats())
		}
		if err := r.Free(o); err != nil {
			t.Fatal(err)
		}
	})
}
