package devalloc

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/accelkit/accelkit/devalloc/memsnap"
	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/drivertest"
	"github.com/accelkit/accelkit/evpool"
)

func gate(t *testing.T, dev driver.Device, s driver.Stream) func() {
	t.Helper()
	open, err := openDevHooks(t, dev).Gate(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(open)
	return open
}

// gatedUse makes an allocator on dev and a 64 KiB block p on stream owner,
// used by a Memset of v on a second stream, user, that a gate holds until open
// is called, and noted there with RecordStream.
func gatedUse(t *testing.T, dev driver.Device, v byte) (a *Allocator, owner, user driver.Stream, p driver.Ptr, open func()) {
	t.Helper()
	ss := streams(t, dev, 2)
	owner, user = ss[0], ss[1]
	a = newAlloc(t, dev, "")
	p = mustAlloc(t, a, 64*kib, owner)
	open = gate(t, dev, user)
	if err := dev.Memset(p, v, 64*kib, user); err != nil { // held by the gate
		t.Fatal(err)
	}
	if err := a.RecordStream(p, user); err != nil {
		t.Fatal(err)
	}
	return a, owner, user, p, open
}

// wantGatedBytes checks that the gated Memset of v over p ran before p
// was handed out again.
func wantGatedBytes(t *testing.T, dev driver.Device, p driver.Ptr, v byte) {
	t.Helper()
	buf := make([]byte, 16)
	if err := dev.CopyDtoHSync(buf, p); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf, bytes.Repeat([]byte{v}, 16)) {
		t.Errorf("gated work's bytes %x missing: the block was reused before it ran", buf)
	}
}

// TestRecordStreamDefersReuse: work held on a gated stream writes into a
// block freed with RecordStream; the owner stream gets the block back only
// after open() and that work.
func TestRecordStreamDefersReuse(t *testing.T) {
	dev, _ := drivertest.OpenDevice(t, "sim", "")
	a, owner, user, p, open := gatedUse(t, dev, 0xAB)
	mustFree(t, a, p)
	snap := a.Snapshot()
	consistent(t, snap)
	if got := stateOf(snap, p); got != memsnap.StateActivePendingFree {
		t.Errorf("freed block state %q, want %q", got, memsnap.StateActivePendingFree)
	}
	q := mustAlloc(t, a, 64*kib, owner)
	if q == p {
		t.Fatalf("block reused while the gated work that writes it is still queued")
	}
	if a.Poll() != 0 {
		t.Fatalf("pending free completed before the gate opened")
	}
	open()
	if err := user.Synchronize(); err != nil {
		t.Fatal(err)
	}
	// The Memset ran; the event after it completes in order.
	if err := a.Drain(); err != nil {
		t.Fatal(err)
	}
	r := mustAlloc(t, a, 64*kib, owner)
	if r != p {
		t.Errorf("after the work finished, Alloc gave %v, want the freed block %v", r, p)
	}
	wantGatedBytes(t, dev, r, 0xAB)
	mustFree(t, a, q)
	mustFree(t, a, r)
}

// TestRecordStreamEventAtFree: work queued on the noted stream after the
// free does not delay reuse (the event is recorded at Free).
func TestRecordStreamEventAtFree(t *testing.T) {
	dev, _ := drivertest.OpenDevice(t, "sim", "")
	ss := streams(t, dev, 2)
	owner, user := ss[0], ss[1]
	a := newAlloc(t, dev, "")
	p := mustAlloc(t, a, 4*kib, owner)
	if err := a.RecordStream(p, user); err != nil {
		t.Fatal(err)
	}
	if err := a.RecordStream(p, owner); err != nil { // the owner: no-op
		t.Fatal(err)
	}
	mustFree(t, a, p)
	gate(t, dev, user) // queued after the free's event: must not matter
	if err := a.Drain(); err != nil {
		t.Fatal(err)
	}
	if q := mustAlloc(t, a, 4*kib, owner); q != p {
		t.Errorf("got %v, want %v: later work on the noted stream delayed reuse", q, p)
	} else {
		mustFree(t, a, q)
	}
	if st := a.Stats(); st.PendingFrees != 0 {
		t.Errorf("pending frees %d", st.PendingFrees)
	}
}

// TestStreamsDoNotShareBlocks: without cross-stream reuse, a block freed on
// one stream is never handed to another.
func TestStreamsDoNotShareBlocks(t *testing.T) {
	dev, _ := drivertest.OpenDevice(t, "sim", "")
	ss := streams(t, dev, 2)
	a := newAlloc(t, dev, "")
	p := mustAlloc(t, a, 4*kib, ss[0])
	mustFree(t, a, p)
	q := mustAlloc(t, a, 4*kib, ss[1])
	if q == p {
		t.Errorf("stream %d got a block cached for stream %d", ss[1].ID(), ss[0].ID())
	}
	mustFree(t, a, q)
	if st := a.Stats(); st.NumCrossStreamReuse != 0 {
		t.Errorf("num_cross_stream_reuse = %d", st.NumCrossStreamReuse)
	}
}

// TestCrossStreamReuse: with cross_stream_reuse the taker gets the giver's
// cached block, and the taker's later work never starts before the giver's
// earlier work ends.
func TestCrossStreamReuse(t *testing.T) {
	dev, _ := drivertest.OpenDevice(t, "sim", "")
	ss := streams(t, dev, 2)
	giver, taker := ss[0], ss[1]
	a := newAlloc(t, dev, "cross_stream_reuse:true")
	p := mustAlloc(t, a, 64*kib, giver)
	open := gate(t, dev, giver)
	if err := dev.Memset(p, 0x5A, 64*kib, giver); err != nil { // the giver's earlier work, held
		t.Fatal(err)
	}
	mustFree(t, a, p) // same stream: cached at once
	q := mustAlloc(t, a, 64*kib, taker)
	if q != p {
		t.Fatalf("taker got %v, want the giver's cached block %v", q, p)
	}
	if st := a.Stats(); st.NumCrossStreamReuse != 1 {
		t.Errorf("num_cross_stream_reuse = %d, want 1", st.NumCrossStreamReuse)
	}
	hb, err := dev.HostAlloc(16)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.HostFree(hb)
	if err := dev.CopyDtoH(hb.Bytes(), q, taker); err != nil { // the taker's later work
		t.Fatal(err)
	}
	if done, err := taker.Query(); done || err != nil {
		t.Fatalf("taker's work finished (%v, %v) while the giver's earlier work is held", done, err)
	}
	open()
	if err := taker.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(hb.Bytes(), bytes.Repeat([]byte{0x5A}, 16)) {
		t.Errorf("taker read %x: its work ran before the giver's Memset", hb.Bytes())
	}
	// Freed by the taker, the block waits for the taker's work before the
	// giver can reuse it.
	open2 := gate(t, dev, taker)
	if err := dev.Memset(q, 0x11, 64*kib, taker); err != nil {
		t.Fatal(err)
	}
	mustFree(t, a, q)
	if got := stateOf(a.Snapshot(), q); got != memsnap.StateActivePendingFree {
		t.Errorf("block freed by the taker: state %q, want %q", got, memsnap.StateActivePendingFree)
	}
	open2()
	if err := a.Drain(); err != nil {
		t.Fatal(err)
	}
	if r := mustAlloc(t, a, 64*kib, giver); r != p {
		t.Errorf("giver got %v, want its block back %v", r, p)
	} else {
		mustFree(t, a, r)
	}
}

func stateOf(snap *memsnap.Snapshot, p driver.Ptr) string {
	for _, seg := range snap.Segments {
		for _, b := range seg.Blocks {
			if b.Address == uint64(p) {
				return b.State
			}
		}
	}
	return ""
}

// TestFreeWhenNoEventCanBeRecorded: a cross-stream Free whose event cannot
// be recorded waits on the host for the noted stream's work, so the block
// is never reused before that work has run; when not even a wait can show
// the work over (a lost device), the block stays live and the caller's.
func TestFreeWhenNoEventCanBeRecorded(t *testing.T) {
	t.Run("host wait", func(t *testing.T) {
		dev, h := drivertest.OpenDevice(t, "sim", "")
		a, owner, _, p, open := gatedUse(t, dev, 0xCD)
		h.SetFaultRate(1, 1) // every event record fails
		go func() {
			time.Sleep(10 * time.Millisecond) // gives an early reuse the chance to show
			open()
		}()
		mustFree(t, a, p) // returns once the gated Memset has run
		h.SetFaultRate(0, 0)
		q := mustAlloc(t, a, 64*kib, owner)
		if q != p {
			t.Fatalf("after the host wait, Alloc gave %v, want the freed block %v", q, p)
		}
		wantGatedBytes(t, dev, q, 0xCD)
		mustFree(t, a, q)
	})
	t.Run("not released", func(t *testing.T) {
		dev, h := drivertest.OpenDevice(t, "sim", "")
		ss := streams(t, dev, 2)
		owner, user := ss[0], ss[1]
		a := newAlloc(t, dev, "")
		p := mustAlloc(t, a, 64*kib, owner)
		if err := a.RecordStream(p, user); err != nil {
			t.Fatal(err)
		}
		before := a.Stats()
		h.LoseDevice()
		for range 2 { // a second Free finds the block live again and fails the same way
			err := a.Free(p)
			if !errors.Is(err, evpool.ErrNotReleased) || !errors.Is(err, driver.ErrDeviceLost) {
				t.Fatalf("Free on a lost device = %v, want evpool.ErrNotReleased wrapping driver.ErrDeviceLost", err)
			}
		}
		after := a.Stats()
		if after.Active.All().Current != before.Active.All().Current ||
			after.AllocatedBytes.All().Current != before.AllocatedBytes.All().Current {
			t.Errorf("a Free that released nothing changed the counts: active %d -> %d", before.Active.All().Current, after.Active.All().Current)
		}
		snap := a.Snapshot()
		if got := stateOf(snap, p); got != memsnap.StateActiveAllocated {
			t.Errorf("block state %q after a refused Free, want %q", got, memsnap.StateActiveAllocated)
		}
		if err := a.RecordStream(p, user); err != nil {
			t.Errorf("RecordStream on the handed-back block: %v (it must still be live)", err)
		}
	})
}
