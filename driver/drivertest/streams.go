package drivertest

// The ordering rules: work on one stream runs in order, events mark
// positions in it, WaitEvent orders one stream after another, a nil stream
// is the default stream, Device.Synchronize waits for every stream, and
// all of it is safe for concurrent use (Concurrent races streams and
// events, with the memory they order).

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/accelkit/accelkit/driver"
)

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

func testNilStream(t *testing.T, e *env) {
	d := e.dev
	def := d.DefaultStream()
	a := e.malloc(t, copySize)
	b := e.malloc(t, copySize)
	src := e.host(t, copySize)
	out := e.host(t, copySize)
	pattern(src.Bytes(), 5)
	must(t, "CopyHtoD with a nil stream is accepted (nil is the default stream)", d.CopyHtoD(a, src.Bytes(), nil))
	must(t, "CopyDtoD with a nil stream is accepted", d.CopyDtoD(b, a, copySize, nil))
	must(t, "Memset with a nil stream is accepted", d.Memset(b, 0xcd, 10, nil))
	must(t, "CopyDtoH on the default stream", d.CopyDtoH(out.Bytes(), b, def))
	must(t, "default stream Synchronize", def.Synchronize())
	want := bytes.Clone(src.Bytes())
	copy(want, bytes.Repeat([]byte{0xcd}, 10))
	if !bytes.Equal(out.Bytes(), want) {
		t.Fatal("rule: work queued with a nil stream runs in order on the default stream")
	}
	// An event recorded on the nil stream marks the default stream's work:
	// a copy on another stream after waiting for it sees that work.
	ev := e.event(t)
	must(t, "Memset with a nil stream", d.Memset(a, 0x77, copySize, nil))
	must(t, "Event.Record with a nil stream is accepted", ev.Record(nil))
	must(t, "Event.Synchronize", ev.Synchronize())
	s := e.stream(t)
	must(t, "CopyDtoH with a nil stream's output", d.CopyDtoH(out.Bytes(), a, s))
	must(t, "Synchronize", s.Synchronize())
	if out.Bytes()[0] != 0x77 || out.Bytes()[copySize-1] != 0x77 {
		t.Error("rule: Event.Record(nil) marks the work queued on the default stream")
	}
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
