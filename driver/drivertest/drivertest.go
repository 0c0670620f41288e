// Package drivertest is the conformance suite every accelkit driver backend
// must pass, in the manner of testing/fstest: Run opens the backend afresh
// for each subtest and checks the rules of package driver (allocation and
// capacity, copy round trips, stream order, event semantics, pinned-memory
// and destroyed-object errors, sticky errors, error mapping, and VMM and
// Peer when offered). A failure message names the rule that was broken.
//
// The suite uses only the driver interfaces. Checks that need failures on
// demand use the optional Faults interface when the device offers it and
// are skipped otherwise.
package drivertest

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/accelkit/accelkit/driver"
)

// Faults is the optional fault-injection capability of a test backend's
// device (driver/sim offers it), found by type assertion on the Device.
type Faults interface {
	// FailStream makes the next work item queued on s fail when it runs.
	FailStream(s driver.Stream)
	// LoseDevice makes every later call on the device fail with
	// driver.ErrDeviceLost.
	LoseDevice()
}

// copySize is the size of most test buffers: large enough that a copy is
// not instantaneous on a GPU (so order bugs show), small enough to be quick
// on every backend.
const copySize = 1 << 20

// Run runs the conformance suite. open must return a freshly opened driver
// with at least one device (the subtests skip when it has none); Run closes
// it at the end of each subtest.
func Run(t *testing.T, open func(t *testing.T) driver.Driver) {
	t.Helper()
	subtests := []struct {
		name string
		fn   func(*testing.T, *env)
	}{
		{"Driver", testDriver},
		{"Alloc", testAlloc},
		{"HostAlloc", testHostAlloc},
		{"Copy", testCopy},
		{"SyncCopy", testSyncCopy},
		{"StreamOrder", testStreamOrder},
		{"Events", testEvents},
		{"WaitEvent", testWaitEvent},
		{"NotPinned", testNotPinned},
		{"Destroyed", testDestroyed},
		{"DeviceSynchronize", testDeviceSynchronize},
		{"Concurrent", testConcurrent},
		{"StickyStreamError", testSticky},
		{"DeviceLost", testDeviceLost},
		{"Closed", testClosed},
		{"VMM", testVMM},
		{"Peer", testPeer},
	}
	for _, st := range subtests {
		t.Run(st.name, func(t *testing.T) {
			e := newEnv(t, open)
			st.fn(t, e)
		})
	}
}

// env is one subtest's opened driver and its first device.
type env struct {
	drv    driver.Driver
	dev    driver.Device
	closed bool // the subtest closed drv itself
}

func newEnv(t *testing.T, open func(*testing.T) driver.Driver) *env {
	t.Helper()
	drv := open(t)
	if drv == nil {
		t.Fatal("open returned a nil driver")
	}
	e := &env{drv: drv}
	t.Cleanup(func() {
		if !e.closed {
			if err := drv.Close(); err != nil {
				t.Errorf("rule: Driver.Close succeeds once: %v", err)
			}
		}
	})
	if drv.DeviceCount() < 1 {
		t.Skipf("%s driver has no device", drv.Name())
	}
	dev, err := drv.Device(0)
	if err != nil {
		t.Fatalf("rule: Device(0) works when DeviceCount() > 0: %v", err)
	}
	e.dev = dev
	return e
}

// must fails the test with the rule when err is not nil.
func must(t *testing.T, rule string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("rule: %s: unexpected error: %v", rule, err)
	}
}

// mustIs fails the test unless err wraps one of want.
func mustIs(t *testing.T, rule string, err error, want ...error) {
	t.Helper()
	for _, w := range want {
		if errors.Is(err, w) {
			return
		}
	}
	if err == nil {
		t.Errorf("rule: %s: got nil error, want one wrapping %v", rule, want)
		return
	}
	t.Errorf("rule: %s: error %q wraps none of %v", rule, err, want)
}

// The helpers below (malloc, host, stream, event) free what they made when
// the subtest ends, ignoring the result: subtests free, lose or close on
// purpose (testAlloc frees a helper's allocation, testDeviceLost and
// testClosed leave every call failing), and the rules for Free, HostFree and
// Destroy are checked where those calls are made on live objects.

func (e *env) malloc(t *testing.T, n uint64) driver.Ptr {
	t.Helper()
	p, err := e.dev.Malloc(n)
	must(t, fmt.Sprintf("Malloc(%d) succeeds on a fresh device", n), err)
	if p == 0 {
		t.Fatalf("rule: Malloc(%d) of a non-zero size never returns the zero Ptr", n)
	}
	t.Cleanup(func() { _ = e.dev.Free(p) }) // best effort; see above
	return p
}

func (e *env) host(t *testing.T, n int) *driver.HostBuffer {
	t.Helper()
	b, err := e.dev.HostAlloc(n)
	must(t, fmt.Sprintf("HostAlloc(%d) succeeds", n), err)
	if b.Len() != n || len(b.Bytes()) != n {
		t.Fatalf("rule: HostAlloc(%d) returns a buffer of that length; got %d", n, b.Len())
	}
	t.Cleanup(func() { _ = e.dev.HostFree(b) }) // best effort; see above
	return b
}

func (e *env) stream(t *testing.T) driver.Stream {
	t.Helper()
	s, err := e.dev.NewStream()
	must(t, "NewStream succeeds", err)
	t.Cleanup(func() { _ = s.Destroy() }) // best effort; see above
	return s
}

func (e *env) event(t *testing.T) driver.Event {
	t.Helper()
	ev, err := e.dev.NewEvent()
	must(t, "NewEvent succeeds", err)
	t.Cleanup(func() { _ = ev.Destroy() }) // best effort; see above
	return ev
}

// pattern fills b with a sequence derived from seed.
func pattern(b []byte, seed byte) {
	for i := range b {
		b[i] = byte(i*31) ^ seed
	}
}

func testDriver(t *testing.T, e *env) {
	if e.drv.Name() == "" {
		t.Error("rule: Driver.Name is the backend's registry name, not empty")
	}
	if e.drv.Version() == "" {
		t.Error("rule: Driver.Version describes the backend, not empty")
	}
	n := e.drv.DeviceCount()
	for i := range n {
		d, err := e.drv.Device(i)
		must(t, "Device(i) works for every i in [0, DeviceCount)", err)
		if d.Ordinal() != i {
			t.Errorf("rule: Device(%d).Ordinal() = %d", i, d.Ordinal())
		}
		if d.Name() == "" {
			t.Errorf("rule: Device(%d).Name() is not empty", i)
		}
	}
	for _, bad := range []int{-1, n} {
		if _, err := e.drv.Device(bad); err == nil {
			t.Errorf("rule: Device(%d) outside [0, %d) is an error", bad, n)
		}
	}
	if s := e.dev.DefaultStream(); s == nil || s.ID() != 0 || s.Device() != e.dev {
		t.Error("rule: DefaultStream has ID 0 and belongs to its device")
	}
	if pd, ok := e.dev.(driver.PropertiesDevice); ok {
		p, err := pd.Properties()
		must(t, "Properties succeeds where offered", err)
		if p.Name == "" || p.TotalMemory == 0 {
			t.Errorf("rule: Properties has a name and total memory; got %+v", p)
		}
	}
}

func testAlloc(t *testing.T, e *env) {
	d := e.dev
	free0, total, err := d.MemInfo()
	must(t, "MemInfo succeeds", err)
	if total == 0 || free0 > total {
		t.Fatalf("rule: MemInfo reports 0 < total and free <= total; got free %d, total %d", free0, total)
	}
	p, err := d.Malloc(0)
	if p != 0 || err != nil {
		t.Errorf("rule: Malloc(0) returns (0, nil); got (%v, %v)", p, err)
	}
	must(t, "Free(0) is a no-op", d.Free(0))

	const n = 8 << 20
	a := e.malloc(t, n)
	b := e.malloc(t, 1)
	if a == b || (b >= a && b < a+n) {
		t.Errorf("rule: live allocations do not overlap; got %v (8 MiB) and %v", a, b)
	}
	free1, total1, err := d.MemInfo()
	must(t, "MemInfo succeeds", err)
	if total1 != total || free1 > free0 {
		t.Errorf("rule: MemInfo total is constant and free does not grow by allocating; before %d/%d, after %d/%d", free0, total, free1, total1)
	}

	c, err := d.Malloc(4096)
	must(t, "Malloc succeeds", err)
	must(t, "Free of a live allocation succeeds", d.Free(c))
	mustIs(t, "a double Free is ErrInvalidPointer", d.Free(c), driver.ErrInvalidPointer)

	_, err = d.Malloc(total * 4)
	mustIs(t, "Malloc beyond the device's memory is ErrOutOfMemory", err, driver.ErrOutOfMemory)
	_, err = d.Malloc(1 << 62)
	mustIs(t, "Malloc of an absurd size is ErrOutOfMemory", err, driver.ErrOutOfMemory)
	// The device still works after refusing.
	must(t, "the device works after an OOM", d.Free(e.malloc(t, 4096)))
}

func testHostAlloc(t *testing.T, e *env) {
	d := e.dev
	z, err := d.HostAlloc(0)
	must(t, "HostAlloc(0) succeeds", err)
	if z == nil || z.Len() != 0 {
		t.Fatal("rule: HostAlloc(0) returns an empty buffer")
	}
	must(t, "HostFree of an empty buffer succeeds", d.HostFree(z))

	b, err := d.HostAlloc(3 * 4096)
	must(t, "HostAlloc succeeds", err)
	if b.Len() != 3*4096 {
		t.Fatalf("rule: HostAlloc(n) has n bytes; got %d", b.Len())
	}
	if b.Device() != d {
		t.Error("rule: HostBuffer.Device is the device that allocated it")
	}
	pattern(b.Bytes(), 1) // writable all through
	must(t, "HostFree of a live buffer succeeds", d.HostFree(b))
	mustIs(t, "a double HostFree is ErrInvalidPointer", d.HostFree(b), driver.ErrInvalidPointer)
	if _, err := d.HostAlloc(-1); err == nil {
		t.Error("rule: HostAlloc of a negative size is an error")
	}
}

func testCopy(t *testing.T, e *env) {
	d := e.dev
	s := e.stream(t)
	src := e.host(t, copySize)
	dst := e.host(t, copySize)
	pattern(src.Bytes(), 7)
	a := e.malloc(t, copySize)
	b := e.malloc(t, copySize)
	must(t, "CopyHtoD from a HostBuffer is accepted", d.CopyHtoD(a, src.Bytes(), s))
	must(t, "CopyDtoD is accepted", d.CopyDtoD(b, a, copySize, s))
	must(t, "Memset is accepted", d.Memset(b+100, 0xab, 50, s))
	must(t, "CopyDtoH into a HostBuffer is accepted", d.CopyDtoH(dst.Bytes(), b, s))
	// Zero-length work is valid and does nothing.
	must(t, "a zero-length CopyHtoD is accepted", d.CopyHtoD(a, src.Bytes()[:0], s))
	must(t, "a zero-length Memset is accepted", d.Memset(a, 0, 0, s))
	must(t, "Stream.Synchronize after good work returns nil", s.Synchronize())
	want := bytes.Clone(src.Bytes())
	for i := 100; i < 150; i++ {
		want[i] = 0xab
	}
	if !bytes.Equal(dst.Bytes(), want) {
		t.Fatal("rule: HtoD, DtoD, Memset and DtoH on one stream round-trip the data")
	}
	// Sub-slices and device offsets.
	must(t, "CopyHtoD from a sub-slice of a HostBuffer is accepted", d.CopyHtoD(a+1000, src.Bytes()[5:505], s))
	must(t, "CopyDtoH into a sub-slice is accepted", d.CopyDtoH(dst.Bytes()[7:507], a+1000, s))
	must(t, "Stream.Synchronize returns nil", s.Synchronize())
	if !bytes.Equal(dst.Bytes()[7:507], src.Bytes()[5:505]) {
		t.Error("rule: copies at offsets move exactly the bytes named")
	}
	must(t, "Memset on the default stream is accepted", d.Memset(a, 1, copySize, d.DefaultStream()))
	must(t, "default stream Synchronize", d.DefaultStream().Synchronize())
}

func testSyncCopy(t *testing.T, e *env) {
	d := e.dev
	a := e.malloc(t, copySize)
	src := make([]byte, copySize) // pageable Go memory is fine for sync copies
	pattern(src, 3)
	must(t, "CopyHtoDSync accepts Go memory", d.CopyHtoDSync(a, src))
	got := make([]byte, copySize)
	must(t, "CopyDtoHSync accepts Go memory", d.CopyDtoHSync(got, a))
	if !bytes.Equal(got, src) {
		t.Fatal("rule: sync copies round-trip the data")
	}
	// Sync copies wait for the default stream.
	must(t, "Memset on the default stream", d.Memset(a, 0x5a, copySize, d.DefaultStream()))
	must(t, "CopyDtoHSync", d.CopyDtoHSync(got, a))
	if !bytes.Equal(got, bytes.Repeat([]byte{0x5a}, copySize)) {
		t.Error("rule: a sync copy waits for the work queued on the default stream")
	}
	must(t, "zero-length sync copies are accepted", d.CopyHtoDSync(a, nil))
}

func testStreamOrder(t *testing.T, e *env) {
	d := e.dev
	s := e.stream(t)
	a := e.malloc(t, copySize)
	out := e.host(t, copySize)
	const rounds = 64
	bufs := make([]*driver.HostBuffer, rounds)
	for i := range bufs {
		bufs[i] = e.host(t, 4096)
		pattern(bufs[i].Bytes(), byte(i))
	}
	for i := range rounds {
		must(t, "Memset", d.Memset(a, byte(i), copySize, s))
		must(t, "CopyHtoD", d.CopyHtoD(a+driver.Ptr(i*4096), bufs[i].Bytes(), s))
	}
	must(t, "CopyDtoH", d.CopyDtoH(out.Bytes(), a, s))
	must(t, "Synchronize", s.Synchronize())
	done, err := s.Query()
	if !done || err != nil {
		t.Errorf("rule: Stream.Query after Synchronize is (true, nil); got (%v, %v)", done, err)
	}
	// The last Memset wrote byte(rounds-1) everywhere, then only the last
	// HtoD landed after it.
	for i := range rounds {
		chunk := out.Bytes()[i*4096 : (i+1)*4096]
		want := bytes.Repeat([]byte{byte(rounds - 1)}, 4096)
		if i == rounds-1 {
			want = bufs[i].Bytes()
		}
		if !bytes.Equal(chunk, want) {
			t.Fatalf("rule: work on one stream runs in the order queued; chunk %d differs", i)
		}
	}
	ids := map[uint64]bool{0: true}
	for range 4 {
		s := e.stream(t)
		if ids[s.ID()] {
			t.Errorf("rule: stream IDs are unique per device; %d repeats", s.ID())
		}
		ids[s.ID()] = true
		if s.Device() != d {
			t.Error("rule: Stream.Device is the device that made it")
		}
	}
}

func testEvents(t *testing.T, e *env) {
	d := e.dev
	ev := e.event(t)
	if ev.Device() != d {
		t.Error("rule: Event.Device is the device that made it")
	}
	done, err := ev.Query()
	if !done || err != nil {
		t.Errorf("rule: an event never recorded is done; Query = (%v, %v)", done, err)
	}
	must(t, "Synchronize on an unrecorded event returns at once", ev.Synchronize())

	s := e.stream(t)
	a := e.malloc(t, copySize)
	out := e.host(t, copySize)
	must(t, "Memset", d.Memset(a, 9, copySize, s))
	must(t, "Record", ev.Record(s))
	must(t, "Event.Synchronize", ev.Synchronize())
	done, err = ev.Query()
	if !done || err != nil {
		t.Errorf("rule: after Event.Synchronize, Query is (true, nil); got (%v, %v)", done, err)
	}
	// The event covers the work before it: a DtoH on another stream after a
	// host-side wait sees the Memset.
	s2 := e.stream(t)
	must(t, "CopyDtoH", d.CopyDtoH(out.Bytes(), a, s2))
	must(t, "Synchronize", s2.Synchronize())
	if out.Bytes()[copySize-1] != 9 {
		t.Error("rule: Event.Synchronize waits for the work recorded before it")
	}
	// Recording again moves the mark.
	must(t, "Memset", d.Memset(a, 10, copySize, s))
	must(t, "Record again", ev.Record(s))
	must(t, "Event.Synchronize", ev.Synchronize())
	must(t, "CopyDtoH", d.CopyDtoH(out.Bytes(), a, s2))
	must(t, "Synchronize", s2.Synchronize())
	if out.Bytes()[0] != 10 {
		t.Error("rule: recording an event again moves its mark to the new position")
	}
	// Record on the default stream works too.
	must(t, "Record on the default stream", ev.Record(d.DefaultStream()))
	must(t, "Event.Synchronize", ev.Synchronize())
}

func testWaitEvent(t *testing.T, e *env) {
	d := e.dev
	a, b := e.stream(t), e.stream(t)
	const n = 8 << 20
	p := e.malloc(t, n)
	src := e.host(t, n)
	out := e.host(t, n)
	pattern(src.Bytes(), 42)
	for round := range 4 {
		ev := e.event(t)
		src.Bytes()[0] = byte(round)
		must(t, "CopyHtoD", d.CopyHtoD(p, src.Bytes(), a))
		must(t, "Memset", d.Memset(p+n-16, byte(round+1), 16, a))
		must(t, "Record", ev.Record(a))
		must(t, "WaitEvent", b.WaitEvent(ev))
		must(t, "CopyDtoH", d.CopyDtoH(out.Bytes(), p, b))
		must(t, "Synchronize", b.Synchronize())
		if out.Bytes()[0] != byte(round) || out.Bytes()[n-1] != byte(round+1) || !bytes.Equal(out.Bytes()[1:n-16], src.Bytes()[1:n-16]) {
			t.Fatalf("rule: work queued after WaitEvent(e) runs after the work e recorded (round %d)", round)
		}
		must(t, "Synchronize", a.Synchronize())
	}
	unrec := e.event(t)
	must(t, "WaitEvent on an unrecorded event is a no-op", b.WaitEvent(unrec))
	must(t, "Synchronize", b.Synchronize())
}

func testNotPinned(t *testing.T, e *env) {
	d := e.dev
	s := e.stream(t)
	p := e.malloc(t, 4096)
	goMem := make([]byte, 4096)
	mustIs(t, "CopyHtoD from Go memory is ErrNotPinned", d.CopyHtoD(p, goMem, s), driver.ErrNotPinned)
	mustIs(t, "CopyDtoH into Go memory is ErrNotPinned", d.CopyDtoH(goMem, p, s), driver.ErrNotPinned)
	b, err := d.HostAlloc(4096)
	must(t, "HostAlloc", err)
	must(t, "CopyHtoD from a live HostBuffer", d.CopyHtoD(p, b.Bytes(), s))
	must(t, "Synchronize", s.Synchronize())
	must(t, "HostFree", d.HostFree(b))
	mustIs(t, "CopyHtoD from a freed HostBuffer is ErrNotPinned", d.CopyHtoD(p, b.Bytes(), s), driver.ErrNotPinned)
	must(t, "refused copies leave no sticky error", s.Synchronize())
}

func testDestroyed(t *testing.T, e *env) {
	d := e.dev
	p := e.malloc(t, 4096)
	s, err := d.NewStream()
	must(t, "NewStream", err)
	must(t, "Memset", d.Memset(p, 1, 4096, s))
	must(t, "Destroy of a stream with queued work succeeds", s.Destroy())
	mustIs(t, "Memset on a destroyed stream is ErrInvalidValue", d.Memset(p, 1, 1, s), driver.ErrInvalidValue)
	mustIs(t, "Synchronize on a destroyed stream is ErrInvalidValue", s.Synchronize(), driver.ErrInvalidValue)
	_, err = s.Query()
	mustIs(t, "Query on a destroyed stream is ErrInvalidValue", err, driver.ErrInvalidValue)
	mustIs(t, "Destroy twice is ErrInvalidValue", s.Destroy(), driver.ErrInvalidValue)
	if err := d.DefaultStream().Destroy(); err == nil {
		t.Error("rule: the default stream cannot be destroyed")
	}

	ev, err := d.NewEvent()
	must(t, "NewEvent", err)
	mustIs(t, "Record on a destroyed stream is ErrInvalidValue", ev.Record(s), driver.ErrInvalidValue)
	must(t, "Record", ev.Record(d.DefaultStream()))
	must(t, "Event.Destroy", ev.Destroy())
	_, err = ev.Query()
	mustIs(t, "Query on a destroyed event is ErrInvalidValue", err, driver.ErrInvalidValue)
	mustIs(t, "Record on a destroyed event is ErrInvalidValue", ev.Record(d.DefaultStream()), driver.ErrInvalidValue)
	mustIs(t, "Synchronize on a destroyed event is ErrInvalidValue", ev.Synchronize(), driver.ErrInvalidValue)
	mustIs(t, "WaitEvent on a destroyed event is ErrInvalidValue", d.DefaultStream().WaitEvent(ev), driver.ErrInvalidValue)
	mustIs(t, "Destroy of an event twice is ErrInvalidValue", ev.Destroy(), driver.ErrInvalidValue)
	must(t, "the device works after misuse", d.Synchronize())
}

func testDeviceSynchronize(t *testing.T, e *env) {
	d := e.dev
	const streams = 4
	p := e.malloc(t, streams*copySize)
	out := e.host(t, streams*copySize)
	for i := range streams {
		s := e.stream(t)
		must(t, "Memset", d.Memset(p+driver.Ptr(i*copySize), byte(i+1), copySize, s))
		must(t, "CopyDtoH", d.CopyDtoH(out.Bytes()[i*copySize:(i+1)*copySize], p+driver.Ptr(i*copySize), s))
	}
	must(t, "Device.Synchronize", d.Synchronize())
	for i := range streams {
		if out.Bytes()[i*copySize] != byte(i+1) || out.Bytes()[(i+1)*copySize-1] != byte(i+1) {
			t.Fatalf("rule: Device.Synchronize waits for the work on every stream (stream %d)", i)
		}
	}
}

func testConcurrent(t *testing.T, e *env) {
	d := e.dev
	const workers, rounds = 4, 20
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			errs <- concurrentWorker(d, byte(w), rounds)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("rule: devices, streams and events are safe for concurrent use: %v", err)
		}
	}
}

func concurrentWorker(d driver.Device, w byte, rounds int) (err error) {
	s, err := d.NewStream()
	if err != nil {
		return err
	}
	// The device stays live here, so freeing what the worker made must
	// succeed: a failure is the worker's error too.
	defer func() { err = errors.Join(err, s.Destroy()) }()
	ev, err := d.NewEvent()
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, ev.Destroy()) }()
	b, err := d.HostAlloc(64 << 10)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, d.HostFree(b)) }()
	for r := range rounds {
		p, err := d.Malloc(64 << 10)
		if err != nil {
			return err
		}
		v := w*50 + byte(r)
		if err := errors.Join(d.Memset(p, v, 64<<10, s), d.CopyDtoH(b.Bytes(), p, s), ev.Record(s), ev.Synchronize()); err != nil {
			return errors.Join(err, d.Free(p))
		}
		if b.Bytes()[r] != v {
			return errors.Join(fmt.Errorf("worker %d round %d read %d, want %d", w, r, b.Bytes()[r], v), d.Free(p))
		}
		if err := d.Free(p); err != nil {
			return err
		}
	}
	return s.Synchronize()
}

// faults returns the device's fault hooks or skips the test.
func faults(t *testing.T, e *env) Faults {
	t.Helper()
	f, ok := e.dev.(Faults)
	if !ok {
		t.Skipf("%s device %T offers no drivertest.Faults", e.drv.Name(), e.dev)
	}
	return f
}

func testSticky(t *testing.T, e *env) {
	f := faults(t, e)
	d := e.dev
	s := e.stream(t)
	p := e.malloc(t, 4096)
	before := e.event(t)
	must(t, "Record", before.Record(s))
	must(t, "Event.Synchronize", before.Synchronize())
	f.FailStream(s)
	if err := d.Memset(p, 1, 4096, s); err != nil {
		mustIs(t, "work queued after FailStream fails with a driver sentinel", err, driver.ErrInvalidValue, driver.ErrDeviceLost)
	}
	after := e.event(t)
	recErr := after.Record(s)
	err := s.Synchronize()
	mustIs(t, "a failure of queued work is returned by Stream.Synchronize", err, driver.ErrInvalidValue, driver.ErrDeviceLost)
	lost := errors.Is(err, driver.ErrDeviceLost)
	_, err = s.Query()
	mustIs(t, "the failure is sticky: Stream.Query returns it", err, driver.ErrInvalidValue, driver.ErrDeviceLost)
	mustIs(t, "the failure is sticky: a second Synchronize returns it", s.Synchronize(), driver.ErrInvalidValue, driver.ErrDeviceLost)
	if recErr == nil {
		_, err = after.Query()
		mustIs(t, "an event recorded after the failed work reports the failure", err, driver.ErrInvalidValue, driver.ErrDeviceLost)
	}
	if lost {
		return // a context-wide failure fails every stream: nothing more to check
	}
	if _, err := before.Query(); err != nil {
		t.Errorf("rule: an event recorded before the failed work does not report it: %v", err)
	}
	other := e.stream(t)
	must(t, "Memset on another stream", d.Memset(p, 2, 4096, other))
	must(t, "a per-stream failure does not fail other streams", other.Synchronize())
}

func testDeviceLost(t *testing.T, e *env) {
	f := faults(t, e)
	d := e.dev
	s := e.stream(t)
	ev := e.event(t)
	p := e.malloc(t, 4096)
	b := e.host(t, 4096)
	f.LoseDevice()
	_, err := d.Malloc(4096)
	mustIs(t, "Malloc on a lost device is ErrDeviceLost", err, driver.ErrDeviceLost)
	mustIs(t, "Memset on a lost device is ErrDeviceLost", d.Memset(p, 0, 1, s), driver.ErrDeviceLost)
	mustIs(t, "CopyHtoD on a lost device is ErrDeviceLost", d.CopyHtoD(p, b.Bytes(), s), driver.ErrDeviceLost)
	mustIs(t, "CopyDtoHSync on a lost device is ErrDeviceLost", d.CopyDtoHSync(make([]byte, 1), p), driver.ErrDeviceLost)
	mustIs(t, "Stream.Synchronize on a lost device is ErrDeviceLost", s.Synchronize(), driver.ErrDeviceLost)
	mustIs(t, "Event.Record on a lost device is ErrDeviceLost", ev.Record(s), driver.ErrDeviceLost)
	mustIs(t, "Device.Synchronize on a lost device is ErrDeviceLost", d.Synchronize(), driver.ErrDeviceLost)
	_, err = d.NewStream()
	mustIs(t, "NewStream on a lost device is ErrDeviceLost", err, driver.ErrDeviceLost)
	_, err = ev.Query()
	mustIs(t, "Event.Query on a lost device is ErrDeviceLost", err, driver.ErrDeviceLost)
}

func testClosed(t *testing.T, e *env) {
	d := e.dev
	s := e.stream(t)
	p, err := d.Malloc(4096)
	must(t, "Malloc", err)
	must(t, "Memset", d.Memset(p, 1, 4096, s))
	must(t, "Close", e.drv.Close())
	e.closed = true
	_, err = d.Malloc(4096)
	mustIs(t, "Malloc after Close is ErrClosed", err, driver.ErrClosed)
	mustIs(t, "Free after Close is ErrClosed", d.Free(p), driver.ErrClosed)
	mustIs(t, "Memset after Close is ErrClosed", d.Memset(p, 0, 1, d.DefaultStream()), driver.ErrClosed)
	mustIs(t, "Stream.Synchronize after Close is ErrClosed", s.Synchronize(), driver.ErrClosed)
	_, err = d.NewEvent()
	mustIs(t, "NewEvent after Close is ErrClosed", err, driver.ErrClosed)
	_, err = e.drv.Device(0)
	mustIs(t, "Driver.Device after Close is ErrClosed", err, driver.ErrClosed)
}

func testVMM(t *testing.T, e *env) {
	d := e.dev
	v, ok := driver.AsVMM(d)
	if !ok {
		t.Skipf("%s device offers no VMM", e.drv.Name())
	}
	g := v.Granularity()
	if g == 0 || g&(g-1) != 0 {
		t.Fatalf("rule: VMM.Granularity is a power of two; got %d", g)
	}
	_, err := v.AddressReserve(g+1, 0)
	mustIs(t, "AddressReserve of a size that is not a granularity multiple is ErrInvalidValue", err, driver.ErrInvalidValue)
	_, err = v.MemCreate(g / 2)
	mustIs(t, "MemCreate of a size that is not a granularity multiple is ErrInvalidValue", err, driver.ErrInvalidValue)

	r, err := v.AddressReserve(4*g, 0)
	must(t, "AddressReserve", err)
	if uint64(r)%g != 0 {
		t.Errorf("rule: AddressReserve returns a granularity-aligned address; got %v", r)
	}
	h, err := v.MemCreate(2 * g)
	must(t, "MemCreate", err)
	must(t, "MemMap", v.MemMap(r, 2*g, 0, h))
	must(t, "SetAccess", v.SetAccess(r, 2*g))
	mustIs(t, "MemMap with a misaligned offset is ErrInvalidValue", v.MemMap(r+driver.Ptr(2*g), g, 1, h), driver.ErrInvalidValue)

	s := e.stream(t)
	n := int(min(2*g, 4<<20))
	src := e.host(t, n)
	out := e.host(t, n)
	pattern(src.Bytes(), 77)
	must(t, "CopyHtoD into mapped VMM memory", d.CopyHtoD(r+driver.Ptr(2*g)-driver.Ptr(n), src.Bytes(), s))
	must(t, "CopyDtoH from mapped VMM memory", d.CopyDtoH(out.Bytes(), r+driver.Ptr(2*g)-driver.Ptr(n), s))
	must(t, "Synchronize", s.Synchronize())
	if !bytes.Equal(out.Bytes(), src.Bytes()) {
		t.Error("rule: mapped VMM memory with access round-trips data")
	}
	// A second mapping of the same handle's memory in the next granules
	// sees the same bytes: it is the same physical memory.
	must(t, "MemMap of the same handle at a second address", v.MemMap(r+driver.Ptr(2*g), 2*g, 0, h))
	must(t, "SetAccess", v.SetAccess(r+driver.Ptr(2*g), 2*g))
	must(t, "CopyDtoH from the second mapping", d.CopyDtoH(out.Bytes(), r+driver.Ptr(4*g)-driver.Ptr(n), s))
	must(t, "Synchronize", s.Synchronize())
	if !bytes.Equal(out.Bytes(), src.Bytes()) {
		t.Error("rule: two mappings of one handle show the same physical memory")
	}
	must(t, "MemUnmap", v.MemUnmap(r+driver.Ptr(2*g), 2*g))
	must(t, "MemRelease of a mapped handle succeeds", v.MemRelease(h))
	must(t, "CopyDtoH from memory of a released handle that is still mapped", d.CopyDtoH(out.Bytes(), r+driver.Ptr(2*g)-driver.Ptr(n), s))
	must(t, "Synchronize", s.Synchronize())
	if !bytes.Equal(out.Bytes(), src.Bytes()) {
		t.Error("rule: memory of a released handle stays until its last unmap")
	}
	must(t, "MemUnmap", v.MemUnmap(r, 2*g))
	// Allocators map page by page and unmap runs of pages at once: one
	// MemUnmap may span several mappings (each covered whole).
	h1, err := v.MemCreate(g)
	must(t, "MemCreate", err)
	h2, err := v.MemCreate(g)
	must(t, "MemCreate", err)
	must(t, "MemMap", v.MemMap(r+driver.Ptr(g), g, 0, h1))
	must(t, "MemMap", v.MemMap(r+driver.Ptr(2*g), g, 0, h2))
	must(t, "SetAccess over two mappings", v.SetAccess(r+driver.Ptr(g), 2*g))
	m := int(min(g, 4<<20))
	must(t, "CopyHtoD across the two mappings", d.CopyHtoD(r+driver.Ptr(2*g)-driver.Ptr(m/2), src.Bytes()[:m], s))
	must(t, "CopyDtoH across the two mappings", d.CopyDtoH(out.Bytes()[:m], r+driver.Ptr(2*g)-driver.Ptr(m/2), s))
	must(t, "Synchronize", s.Synchronize())
	if !bytes.Equal(out.Bytes()[:m], src.Bytes()[:m]) {
		t.Error("rule: adjacent mappings of two handles read back as one range")
	}
	must(t, "MemRelease", v.MemRelease(h1))
	must(t, "MemRelease", v.MemRelease(h2))
	must(t, "MemUnmap of a range spanning two mappings", v.MemUnmap(r+driver.Ptr(g), 2*g))
	must(t, "AddressFree", v.AddressFree(r, 4*g))
}

func testPeer(t *testing.T, e *env) {
	d := e.dev
	if _, ok := driver.AsPeer(d); !ok {
		t.Skipf("%s device offers no Peer", e.drv.Name())
	}
	if e.drv.DeviceCount() < 2 {
		t.Skipf("%s driver has one device; peer access needs two", e.drv.Name())
	}
	d1, err := e.drv.Device(1)
	must(t, "Device(1)", err)
	p1, ok := driver.AsPeer(d1)
	if !ok {
		t.Fatal("rule: every device of a driver offers the same capabilities")
	}
	can, err := p1.CanAccessPeer(d)
	must(t, "CanAccessPeer", err)
	if !can {
		t.Skip("device 1 cannot access device 0")
	}
	must(t, "EnablePeerAccess", p1.EnablePeerAccess(d))
	src := e.malloc(t, copySize)
	data := make([]byte, copySize)
	pattern(data, 99)
	must(t, "CopyHtoDSync", d.CopyHtoDSync(src, data))
	dst, err := d1.Malloc(copySize)
	must(t, "Malloc on device 1", err)
	defer func() {
		if err := d1.Free(dst); err != nil {
			t.Errorf("rule: Free of a live allocation on device 1 succeeds: %v", err)
		}
	}()
	s, err := d1.NewStream()
	must(t, "NewStream on device 1", err)
	defer func() {
		if err := s.Destroy(); err != nil {
			t.Errorf("rule: Stream.Destroy on device 1 succeeds: %v", err)
		}
	}()
	must(t, "CopyPeer", p1.CopyPeer(dst, src, d, copySize, s))
	must(t, "Synchronize", s.Synchronize())
	got := make([]byte, copySize)
	must(t, "CopyDtoHSync on device 1", d1.CopyDtoHSync(got, dst))
	if !bytes.Equal(got, data) {
		t.Error("rule: CopyPeer copies from the peer device's memory")
	}
}
