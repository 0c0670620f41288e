package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/backendkit"
)

// Device is one simulated device. It implements driver.Device,
// driver.PropertiesDevice, driver.VMM, driver.Peer,
// driver.HostRegisterDevice and driver.Launcher, and carries the test hooks
// (Gate, FailNthMalloc, SetFaultRate, FailStream, LoseDevice, Stats). The
// driver.Device that Driver.Device returns offers VMM, Peer,
// HostRegisterDevice and Launcher only when configured (backendkit.Compose);
// Hooks recovers the *Device from it. Safe for concurrent use.
type Device struct {
	// Locking: mu guards used, streams, nextStream, handles, nextHandle,
	// peersOn and the fault-injection state. Lock order: mu before a table's mu;
	// mu is never held while taking a stream's or an event's mu. mem and host
	// have their own locks (see table); state and the counters are atomic.

	drv     *Driver
	ordinal int
	cfg     Config
	// state names the device in errors ("sim device N"), holds what
	// Driver.Device hands out (backendkit.Compose of d) and whether the device
	// is live, lost or closed.
	state backendkit.DeviceState
	stats counters

	mem  *table // device allocations and VMM reservations
	host *table // HostAlloc buffers and HostRegister registrations

	defStream *stream
	wg        sync.WaitGroup // stream goroutines
	abortC    chan struct{}  // closed by abort: opens gates
	abortOnce sync.Once

	mu         sync.Mutex
	used       uint64 // capacity charged by Malloc and MemCreate
	streams    map[uint64]*stream
	nextStream uint64
	handles    map[driver.MemHandle]*memHandle
	nextHandle driver.MemHandle
	peersOn    map[int]bool
	failNth    int // FailNthMalloc countdown; 0 is off
	faultP     float64
	faultRNG   *rand.Rand
	faultOn    atomic.Bool // FailNthMalloc or SetFaultRate armed: the fast path skips mu
}

func newDevice(drv *Driver, ordinal int) *Device {
	d := &Device{
		drv:     drv,
		ordinal: ordinal,
		cfg:     drv.cfg,
		mem:     newTable(),
		host:    newTable(),
		streams: map[uint64]*stream{},
		handles: map[driver.MemHandle]*memHandle{},
		peersOn: map[int]bool{},
		abortC:  make(chan struct{}),
	}
	// *Device implements every capability; Compose hides those the Config
	// leaves off, so type assertions for driver.VMM, driver.Peer,
	// driver.HostRegisterDevice and driver.Launcher fail as they would on
	// hardware without them.
	caps := backendkit.Capabilities{Properties: d}
	if d.cfg.VMM {
		caps.VMM = d
	}
	if d.cfg.Peer {
		caps.Peer = d
	}
	if d.cfg.HostRegister {
		caps.HostRegister = d
	}
	if d.cfg.Launcher {
		caps.Launcher = d
	}
	d.state.Who = "sim device " + strconv.Itoa(ordinal)
	d.state.Public = backendkit.Compose(d, caps)
	d.defStream = newStream(d, 0)
	d.streams[0] = d.defStream
	d.nextStream = 1
	return d
}

// Hooks returns the *Device behind a device from a sim Driver, or nil when
// dev is not a sim device.
func Hooks(dev driver.Device) *Device {
	for dev != nil {
		if d, ok := dev.(*Device); ok {
			return d
		}
		dev = backendkit.Unwrap(dev)
	}
	return nil
}

func (d *Device) live() bool { return d.state.Live() }

// lose marks the device lost with err, which wraps driver.ErrDeviceLost
// (LoseDevice, a kernel fault), and wakes its waiters. The first loss is
// the one every later call reports.
func (d *Device) lose(err error) {
	d.state.Lose(err)
	d.abort()
}

// abort wakes every stream goroutine and waiter after the device was lost
// or closed, so gates open and waits end.
func (d *Device) abort() {
	d.abortOnce.Do(func() { close(d.abortC) })
	// Streams of other devices may wait on this device's events: wake all.
	var streams []*stream
	for _, o := range d.drv.devices {
		o.mu.Lock()
		for _, s := range o.streams {
			streams = append(streams, s)
		}
		o.mu.Unlock()
	}
	for _, s := range streams {
		s.wake()
	}
}

// shutdown waits for the stream goroutines, unmaps all memory and unpins
// the registrations, whose memory is the caller's (Close).
func (d *Device) shutdown() error {
	d.wg.Wait()
	var errs []error
	for _, t := range []*table{d.mem, d.host} {
		for _, r := range t.drain() {
			if r.mapped > 0 {
				errs = append(errs, unmap(r.base, r.mapped))
			}
			if r.kind == kindRegistered {
				r.pin.Unpin()
			}
		}
	}
	d.mu.Lock()
	for h, mh := range d.handles {
		mh.closeLocked()
		delete(d.handles, h)
	}
	d.used = 0
	d.mu.Unlock()
	d.stats.bytesAllocated.Store(0)
	return errors.Join(errs...)
}

// forget drops an exited stream.
func (d *Device) forget(s *stream) {
	d.mu.Lock()
	if d.streams[s.id] == s {
		delete(d.streams, s.id)
	}
	d.mu.Unlock()
}

// stream resolves s to a live stream of d; nil means the default stream
// (driver.StreamOr).
func (d *Device) stream(s driver.Stream, op string) (*stream, error) {
	st, ok := driver.StreamOr(d.state.Public, s).(*stream)
	if err := d.state.CheckStream(op, s, ok && st != nil && st.dev == d); err != nil {
		return nil, err
	}
	st.mu.Lock()
	err := st.usableLocked(op)
	st.mu.Unlock()
	return st, err
}

// Ordinal returns the device's index in its driver.
func (d *Device) Ordinal() int { return d.ordinal }

// Name returns "accelkit sim device N".
func (d *Device) Name() string { return "accelkit sim device " + strconv.Itoa(d.ordinal) }

// Properties describes the device; Simulated is true.
func (d *Device) Properties() (driver.Properties, error) {
	if err := d.state.Check("Properties"); err != nil {
		return driver.Properties{}, err
	}
	return driver.Properties{
		Name:        d.Name(),
		TotalMemory: d.cfg.Capacity,
		Simulated:   true,
		Attributes: map[string]string{
			"vmm":          strconv.FormatBool(d.cfg.VMM),
			"granularity":  strconv.FormatUint(d.cfg.Granularity, 10),
			"peer":         strconv.FormatBool(d.cfg.Peer),
			"hostregister": strconv.FormatBool(d.cfg.HostRegister),
			"launcher":     strconv.FormatBool(d.cfg.Launcher),
			// The launch limits, named as CUDA's device attributes.
			"max_threads_per_block":       strconv.Itoa(MaxThreadsPerBlock),
			"max_shared_memory_per_block": strconv.Itoa(MaxSharedPerBlock),
			"page_size":                   strconv.FormatUint(pageSize, 10),
			"devices":                     strconv.Itoa(d.cfg.Devices),
		},
	}, nil
}

// MemInfo reports free and total device memory: total is the capacity, free
// what Malloc and MemCreate have not charged (page-rounded sizes).
func (d *Device) MemInfo() (free, total uint64, err error) {
	if err := d.state.Check("MemInfo"); err != nil {
		return 0, 0, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cfg.Capacity - d.used, d.cfg.Capacity, nil
}

// charge takes n bytes of capacity for op.
func (d *Device) charge(op string, requested, n uint64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if n > d.cfg.Capacity-d.used {
		return fmt.Errorf("sim device %d: %s: requested %d bytes (%d charged), free %d of capacity %d: %w",
			d.ordinal, op, requested, n, d.cfg.Capacity-d.used, d.cfg.Capacity, driver.ErrOutOfMemory)
	}
	d.used += n
	d.stats.bytesAllocated.Add(int64(n))
	return nil
}

func (d *Device) refund(n uint64) {
	d.mu.Lock()
	d.used -= n
	d.mu.Unlock()
	d.stats.bytesAllocated.Add(-int64(n))
}

// Malloc maps size bytes of device memory; the pointer is its real address.
// The capacity is charged the size rounded up to the page.
func (d *Device) Malloc(size uint64) (driver.Ptr, error) {
	if err := d.state.Check("Malloc"); err != nil {
		return 0, err
	}
	if size == 0 {
		return 0, nil
	}
	if err := d.mallocFault(size); err != nil {
		return 0, err
	}
	if size > math.MaxUint64-pageSize {
		return 0, fmt.Errorf("sim device %d: Malloc of %d bytes: requested %d bytes, free %d of capacity %d: %w",
			d.ordinal, size, size, d.free(), d.cfg.Capacity, driver.ErrOutOfMemory)
	}
	n := roundUp(size, pageSize)
	if err := d.charge("Malloc", size, n); err != nil {
		return 0, err
	}
	p, err := mapDevice(n)
	if err != nil {
		d.refund(n)
		return 0, fmt.Errorf("sim device %d: Malloc: %w", d.ordinal, err)
	}
	d.mem.mu.Lock()
	ok := d.mem.insertLocked(&region{base: p, size: size, mapped: n, kind: kindAlloc})
	d.mem.mu.Unlock()
	if !ok { // Close ran meanwhile: undo the mapping, reporting a failed munmap too
		return 0, errors.Join(d.state.Check("Malloc"), unmap(p, n))
	}
	d.stats.mallocs.Add(1)
	return driver.Ptr(p), nil
}

func (d *Device) free() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cfg.Capacity - d.used
}

// Free unmaps memory from Malloc. Work still queued on it fails when it
// runs (a sticky error on its stream).
func (d *Device) Free(p driver.Ptr) error {
	if err := d.state.Check("Free"); err != nil {
		return err
	}
	if p == 0 {
		return nil
	}
	d.mem.mu.Lock()
	r := d.mem.findLocked(uint64(p))
	switch {
	case r == nil:
		d.mem.mu.Unlock()
		return d.state.UnknownPointerError(p)
	case r.kind != kindAlloc:
		d.mem.mu.Unlock()
		return fmt.Errorf("sim device %d: Free(%v): address is in a VMM reservation [%#x, %#x); release it with AddressFree: %w",
			d.ordinal, p, r.base, r.end(), driver.ErrInvalidPointer)
	case r.base != uint64(p):
		d.mem.mu.Unlock()
		return fmt.Errorf("sim device %d: Free(%v): address is inside allocation [%#x, %#x), not its start: %w",
			d.ordinal, p, r.base, r.end(), driver.ErrInvalidPointer)
	}
	d.mem.removeLocked(r)
	d.mem.mu.Unlock()
	err := unmap(r.base, r.mapped)
	d.refund(r.mapped)
	d.stats.frees.Add(1)
	return err
}

// HostAlloc maps size bytes of pre-faulted host memory, locked when the
// memlock limit allows. HostAlloc(0) returns an empty buffer without a
// mapping.
func (d *Device) HostAlloc(size int) (*driver.HostBuffer, error) {
	if b, err := d.state.CheckHostAlloc(size); b != nil || err != nil {
		return b, err
	}
	if err := d.fault("HostAlloc", true); err != nil {
		return nil, err
	}
	if ram := totalRAM(); ram > 0 && uint64(size) > ram {
		return nil, fmt.Errorf("sim device %d: HostAlloc(%d): more than the machine's %d bytes of RAM cannot be pinned: %w",
			d.ordinal, size, ram, driver.ErrOutOfMemory)
	}
	n := roundUp(uint64(size), pageSize)
	p, err := mapHost(n)
	if err != nil {
		return nil, fmt.Errorf("sim device %d: HostAlloc(%d): %w", d.ordinal, size, err)
	}
	r := &region{base: p, size: uint64(size), mapped: n, kind: kindHost}
	r.buf = driver.NewHostBuffer(d.state.Public, bytesAt(p, uint64(size)), r)
	d.host.mu.Lock()
	ok := d.host.insertLocked(r)
	d.host.mu.Unlock()
	if !ok { // Close ran meanwhile: undo the mapping, reporting a failed munmap too
		return nil, errors.Join(d.state.Check("HostAlloc"), unmap(p, n))
	}
	d.stats.hostAllocs.Add(1)
	return r.buf, nil
}

// HostFree unmaps a buffer from HostAlloc. Copies still queued on it fail
// when they run. A registration is not freed here (HostUnregister).
func (d *Device) HostFree(b *driver.HostBuffer) error {
	r, ok, err := backendkit.HostBufferState[*region](&d.state, b)
	if !ok {
		return err
	}
	if r.kind == kindRegistered { // fixed at HostRegister: no lock needed
		return d.state.RegisteredFreeError(b)
	}
	d.host.mu.Lock()
	switch {
	case r.dead:
		d.host.mu.Unlock()
		return d.state.HostFreedError(int(r.size))
	case d.host.findLocked(r.base) != r:
		d.host.mu.Unlock()
		return fmt.Errorf("sim device %d: HostFree: buffer is not a live HostAlloc buffer of this device: %w", d.ordinal, driver.ErrInvalidPointer)
	}
	d.host.removeLocked(r)
	d.host.mu.Unlock()
	d.stats.hostFrees.Add(1)
	return unmap(r.base, r.mapped)
}

// DefaultStream returns stream 0.
func (d *Device) DefaultStream() driver.Stream { return d.defStream }

// NewStream creates a stream with its own goroutine; Destroy ends it.
func (d *Device) NewStream() (driver.Stream, error) {
	if err := d.state.Check("NewStream"); err != nil {
		return nil, err
	}
	if err := d.fault("NewStream", false); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	// Checked again under mu: abort sets the state before it takes mu to
	// collect the streams, so a stream made here is seen by Close.
	if err := d.state.Check("NewStream"); err != nil {
		return nil, err
	}
	id := d.nextStream
	d.nextStream++
	s := newStream(d, id)
	d.streams[id] = s
	d.stats.streamsCreated.Add(1)
	return s, nil
}

// NewEvent creates an event.
func (d *Device) NewEvent() (driver.Event, error) {
	if err := d.state.Check("NewEvent"); err != nil {
		return nil, err
	}
	if err := d.fault("NewEvent", false); err != nil {
		return nil, err
	}
	d.stats.eventsCreated.Add(1)
	return &event{dev: d}, nil
}

// Synchronize waits for the work queued on every stream of the device and
// returns the streams' sticky errors.
func (d *Device) Synchronize() error {
	if err := d.state.Check("Synchronize"); err != nil {
		return err
	}
	d.mu.Lock()
	streams := make([]*stream, 0, len(d.streams))
	for _, s := range d.streams {
		streams = append(streams, s)
	}
	d.mu.Unlock()
	var errs []error
	for _, s := range streams {
		s.mu.Lock()
		s.waitPosLocked(s.enq, true)
		errs = append(errs, s.err)
		s.mu.Unlock()
	}
	if err := d.state.Check("Synchronize"); err != nil {
		return err
	}
	return errors.Join(errs...)
}

// hostAddr returns the address and length of a host slice.
func hostAddr(b []byte) (uint64, uint64) {
	if len(b) == 0 {
		return 0, 0
	}
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))), uint64(len(b))
}
