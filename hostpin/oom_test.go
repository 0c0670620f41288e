package hostpin

// Out of pinned memory: the Allocator releases its idle cache and retries
// once (core.hostAlloc with Allocator.releaseIdle); Direct does not retry.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/drivertest"
	"github.com/accelkit/accelkit/driver/sim"
)

// pinnedCap is a device whose pinned memory holds at most limit bytes: a
// HostAlloc beyond it fails with driver.ErrOutOfMemory, as cuMemHostAlloc
// does when the host will lock no more pages. It counts HostAlloc attempts
// and keeps the buffers it handed out, so a test sees which were freed.
//
// Locking: mu guards every field but Device, limit and onOOM, which are set
// before use and never change.
type pinnedCap struct {
	driver.Device
	limit int
	onOOM func() // called, without mu, before a HostAlloc is refused; may be nil

	mu       sync.Mutex
	held     int
	attempts int
	live     map[*driver.HostBuffer]bool
}

// newPinnedCap opens a sim device and wraps it in a pinnedCap of limit
// bytes.
func newPinnedCap(t *testing.T, limit int) (*pinnedCap, *sim.Device) {
	t.Helper()
	dev, sd := drivertest.OpenDevice(t, "sim", "")
	return &pinnedCap{Device: dev, limit: limit, live: map[*driver.HostBuffer]bool{}}, sd
}

func (d *pinnedCap) HostAlloc(n int) (*driver.HostBuffer, error) {
	d.mu.Lock()
	d.attempts++
	if d.held+n > d.limit {
		held := d.held
		d.mu.Unlock()
		if d.onOOM != nil {
			d.onOOM()
		}
		return nil, fmt.Errorf("pinnedCap: %d of %d bytes pinned, %d more refused: %w", held, d.limit, n, driver.ErrOutOfMemory)
	}
	defer d.mu.Unlock()
	hb, err := d.Device.HostAlloc(n)
	if err != nil {
		return nil, err
	}
	d.held += hb.Len()
	d.live[hb] = true
	return hb, nil
}

func (d *pinnedCap) HostFree(hb *driver.HostBuffer) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.live[hb] {
		delete(d.live, hb)
		d.held -= hb.Len()
	}
	return d.Device.HostFree(hb)
}

// counts returns the HostAlloc attempts so far and the bytes held.
func (d *pinnedCap) counts() (attempts, held int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.attempts, d.held
}

// holds reports whether the driver buffer behind b is still allocated.
func (d *pinnedCap) holds(b *Buffer) bool {
	hb := b.blk.hb
	if b.blk.slab != nil {
		hb = b.blk.slab.hb
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.live[hb]
}

// TestOutOfMemoryRetry: an Alloc that finds the pinned memory full of idle
// cached buffers succeeds after the cache goes back to the driver, with one
// retry; buffers in use or waiting for their streams are never released;
// with nothing idle nothing is retried; an out of memory that stands wraps
// driver.ErrOutOfMemory and says what to do. Each case fails if the
// release, the retry, or its "once" is taken away.
func TestOutOfMemoryRetry(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name    string
		limit   int
		idle    []int // allocated and freed before the request: cached
		inUse   []int // allocated and kept
		pending int   // if > 0, a buffer of this size freed behind a gated copy
		request int

		wantErr      bool
		wantAttempts int // HostAlloc calls made by the request
		wantReleased int // driver frees made by the request
		wantRetries  uint64
		wantInMsg    string // in the error, when wantErr
	}{
		{name: "idle buffers released, retried once", limit: 4 * mib,
			idle: []int{mib, mib, mib}, request: 2 * mib,
			wantAttempts: 2, wantReleased: 3, wantRetries: 1},
		{name: "idle slab released for a standalone buffer", limit: 2 * mib,
			idle: []int{4096, 4096}, request: 3 * mib / 2,
			wantAttempts: 2, wantReleased: 1, wantRetries: 1},
		{name: "idle buffer released for a slab", limit: 3 * mib / 2,
			idle: []int{mib}, request: 4096,
			wantAttempts: 2, wantReleased: 1, wantRetries: 1},
		{name: "pending buffer kept, idle one released", limit: 3 * mib,
			idle: []int{mib}, pending: mib, request: 2 * mib,
			wantAttempts: 2, wantReleased: 1, wantRetries: 1},
		{name: "buffers in use kept, the retry fails once", limit: 3 * mib,
			idle: []int{mib}, inUse: []int{mib, mib}, request: 2 * mib,
			wantErr: true, wantAttempts: 2, wantReleased: 1, wantRetries: 1,
			wantInMsg: "its 1 idle driver allocations were released and the allocation retried once"},
		{name: "nothing idle, nothing retried", limit: 2 * mib,
			inUse: []int{mib, mib}, request: mib,
			wantErr: true, wantAttempts: 1, wantReleased: 0, wantRetries: 0,
			wantInMsg: "nothing idle could be released, so it was not retried"},
		{name: "idle slab pieces of a busy slab cannot go", limit: 3 * mib / 2,
			inUse: []int{4096}, request: mib,
			wantErr: true, wantAttempts: 1, wantReleased: 0, wantRetries: 0,
			wantInMsg: "nothing idle could be released"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dev, sd := newPinnedCap(t, tc.limit)
			a := newAlloc(t, dev, Options{})
			var idle []*Buffer
			for _, n := range tc.idle {
				idle = append(idle, mustAlloc(t, a, n))
			}
			var kept []*Buffer
			for i, n := range tc.inUse {
				b := mustAlloc(t, a, n)
				copy(b.Bytes(), pattern(n, uint32(i+1)))
				kept = append(kept, b)
			}
			var pending *Buffer
			var open func()
			var dptr driver.Ptr
			st := newStream(t, dev)
			if tc.pending > 0 {
				pending = mustAlloc(t, a, tc.pending)
				copy(pending.Bytes(), pattern(tc.pending, 7))
				dptr = devMalloc(t, dev, tc.pending)
				var err error
				if open, err = sd.Gate(st); err != nil {
					t.Fatal(err)
				}
				defer open()
				if err := dev.CopyHtoD(dptr, pending.Bytes(), st); err != nil { // reads pending once the gate opens
					t.Fatal(err)
				}
				if err := a.RecordStream(pending, st); err != nil {
					t.Fatal(err)
				}
				mustFree(t, a, pending)
			}
			for _, b := range idle {
				mustFree(t, a, b)
			}
			before := a.Stats()
			attempts0, _ := dev.counts()

			b, err := a.Alloc(tc.request)

			s := a.Stats()
			attempts, held := dev.counts()
			if got := attempts - attempts0; got != tc.wantAttempts {
				t.Errorf("the request made %d HostAlloc calls, want %d", got, tc.wantAttempts)
			}
			if got := s.DriverFrees - before.DriverFrees; got != uint64(tc.wantReleased) {
				t.Errorf("the request made %d driver frees, want %d", got, tc.wantReleased)
			}
			if got := s.AllocRetries - before.AllocRetries; got != tc.wantRetries {
				t.Errorf("AllocRetries went up by %d, want %d", got, tc.wantRetries)
			}
			for i, b := range idle {
				if tc.wantReleased > 0 && dev.holds(b) {
					t.Errorf("idle buffer %d was not returned to the driver", i)
				}
			}
			if s.BytesReserved != int64(held) {
				t.Errorf("BytesReserved %d, but the device holds %d bytes for the allocator", s.BytesReserved, held)
			}
			for i, k := range kept {
				if !dev.holds(k) {
					t.Errorf("buffer %d in use was returned to the driver", i)
				}
				if !bytes.Equal(k.Bytes(), pattern(tc.inUse[i], uint32(i+1))) {
					t.Errorf("buffer %d in use changed", i)
				}
			}
			if pending != nil {
				if !dev.holds(pending) {
					t.Error("a buffer waiting for its stream was returned to the driver")
				}
				open()
				if err := st.Synchronize(); err != nil {
					t.Fatalf("the gated copy from the pending buffer: %v", err)
				}
				got := make([]byte, tc.pending)
				if err := dev.CopyDtoHSync(got, dptr); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, pattern(tc.pending, 7)) {
					t.Error("the gated copy read other bytes than the pending buffer's")
				}
			}
			if !tc.wantErr {
				if err != nil {
					t.Fatalf("Alloc(%d) = %v, want it to succeed after the idle cache went back", tc.request, err)
				}
				if s.OOMs != 0 {
					t.Errorf("OOMs %d after a successful retry, want 0", s.OOMs)
				}
				mustFree(t, a, b)
				return
			}
			if err == nil {
				t.Fatalf("Alloc(%d) succeeded past the %d-byte pinned limit", tc.request, tc.limit)
			}
			if !errors.Is(err, driver.ErrOutOfMemory) {
				t.Errorf("error %v does not match driver.ErrOutOfMemory", err)
			}
			for _, want := range []string{"hostpin: out of pinned memory for", tc.wantInMsg, "free the buffers you no longer need", "EmptyCache", "Options.CacheCap"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if s.OOMs != 1 || s.Requests != before.Requests || s.Misses != before.Misses {
				t.Errorf("after the failure: OOMs %d (want 1), Requests %d (want %d), Misses %d (want %d)",
					s.OOMs, s.Requests, before.Requests, s.Misses, before.Misses)
			}
			for _, k := range kept {
				mustFree(t, a, k)
			}
		})
	}
}

// TestOutOfMemoryDirect: a Direct caches nothing, so an out of memory is
// not retried; the error says so and what to do.
func TestOutOfMemoryDirect(t *testing.T) {
	dev, _ := newPinnedCap(t, 1<<20)
	d := newDirect(t, dev, DirectOptions{})
	kept, err := d.Alloc(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free(kept)
	attempts0, _ := dev.counts()
	_, err = d.Alloc(4096)
	attempts, _ := dev.counts()
	if attempts-attempts0 != 1 {
		t.Errorf("Direct made %d HostAlloc calls for one Alloc, want 1 (no retry)", attempts-attempts0)
	}
	if !errors.Is(err, driver.ErrOutOfMemory) {
		t.Fatalf("Alloc past the limit = %v, want an error matching driver.ErrOutOfMemory", err)
	}
	for _, want := range []string{"it caches nothing to release", "free the buffers you no longer need"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if s := d.Stats(); s.AllocRetries != 0 || s.OOMs != 1 || s.DriverFrees != 0 {
		t.Errorf("after the failure: %+v; want no retry, one OOM, no driver free", s)
	}
}

// TestOutOfMemoryStager: the Stager's slots come through the same Alloc,
// so a staged copy on a device whose pinned memory is full of idle cached
// buffers releases them and runs.
func TestOutOfMemoryStager(t *testing.T) {
	const mib = 1 << 20
	dev, _ := newPinnedCap(t, 4*mib)
	a := newAlloc(t, dev, Options{})
	var idle []*Buffer
	for range 3 {
		idle = append(idle, mustAlloc(t, a, mib))
	}
	for _, b := range idle {
		mustFree(t, a, b)
	}
	// Two 1 MiB slots: one 2 MiB buffer, which no cached 1 MiB one serves.
	sg := newStager(t, a, StagerOptions{ChunkSize: mib, InFlight: 2, Workers: 1})
	src := pattern(5*mib, 3)
	dptr := devMalloc(t, dev, len(src))
	st := newStream(t, dev)
	if err := sg.CopyHtoD(context.Background(), dptr, src, st); err != nil {
		t.Fatalf("staged copy with the pinned memory full of idle buffers: %v", err)
	}
	if err := st.Synchronize(); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(src))
	if err := dev.CopyDtoHSync(got, dptr); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, src) {
		t.Error("the staged copy delivered other bytes")
	}
	if s := a.Stats(); s.AllocRetries != 1 || s.DriverFrees != 3 || s.OOMs != 0 {
		t.Errorf("after the copy: %+v; want one retry that released the 3 idle buffers", s)
	}
}

// TestOutOfMemoryAcrossReset: ResetAccumulatedStats between a miss and its
// failure leaves the new counts alone (no uint64 wrap from the undo).
func TestOutOfMemoryAcrossReset(t *testing.T) {
	dev, _ := newPinnedCap(t, 1<<20)
	a := newAlloc(t, dev, Options{})
	dev.onOOM = a.ResetAccumulatedStats
	if _, err := a.Alloc(2 << 20); !errors.Is(err, driver.ErrOutOfMemory) {
		t.Fatalf("Alloc past the limit = %v, want out of memory", err)
	}
	if s := a.Stats(); s.Requests != 0 || s.Misses != 0 || s.OOMs != 1 {
		t.Errorf("after a reset during the failing Alloc: Requests %d, Misses %d, OOMs %d; want 0, 0, 1", s.Requests, s.Misses, s.OOMs)
	}
}
