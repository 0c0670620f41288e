package main

// The library's Go half, without cgo: one devalloc resource per device of
// driver/cuda, the table of live allocations that lets bad calls be
// refused without touching the allocator, and the operations the exports
// (exports.go) make of the C calls. The tests drive it in-process; the C
// and Python harnesses drive the built library.

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/accelkit/accelkit/atomicfile"
	"github.com/accelkit/accelkit/devalloc"
	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/cuda"
)

// library is the process's allocator state: a driver/cuda driver and one
// resource per device, fixed at open. Safe for concurrent use.
//
// Locking: drv, cfg and devs are fixed at open; each live shard's mutex
// guards its map and is never held across an allocator or driver call.
type library struct {
	drv  driver.Driver
	cfg  devalloc.Config
	devs []devState
	live [liveShards]liveShard
}

type devState struct {
	dev driver.Device
	res devalloc.Resource
	a   *devalloc.Allocator // res as the caching allocator; nil for backend:passthrough
}

// liveShards spreads the live table over this many mutexes, so threads
// allocating at once seldom meet on one.
const liveShards = 64

type liveShard struct {
	mu sync.Mutex
	m  map[uintptr]liveAlloc
	_  [40]byte // keep shards on separate cache lines
}

// liveAlloc is what the caller's free must match.
type liveAlloc struct {
	dev    int
	size   uint64
	handle uintptr // the stream handle the allocation was made for
}

func shardOf(p uintptr) int { return int(p>>9) % liveShards }

// openLibrary opens driver/cuda (dsn as cuda.Open takes it: "" loads
// $ACCELKIT_LIBCUDA, else libcuda.so.1) and a devalloc resource per device
// with cfg.
func openLibrary(dsn string, cfg devalloc.Config) (*library, error) {
	drv, err := cuda.Open(dsn)
	if err != nil {
		return nil, err
	}
	l := &library{drv: drv, cfg: cfg}
	for i := range l.live {
		l.live[i].m = map[uintptr]liveAlloc{}
	}
	for i := range drv.DeviceCount() {
		dev, err := drv.Device(i)
		if err != nil {
			return nil, errors.Join(err, l.close())
		}
		res, err := devalloc.Open(dev, cfg)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("device %d: %w", i, err), l.close())
		}
		a, _ := res.(*devalloc.Allocator)
		l.devs = append(l.devs, devState{dev: dev, res: res, a: a})
	}
	return l, nil
}

// close closes the resources and the driver (tests; the library itself
// lives as long as the process).
func (l *library) close() error {
	var errs []error
	for _, d := range l.devs {
		errs = append(errs, d.res.Close())
	}
	return errors.Join(append(errs, l.drv.Close())...)
}

// device returns device i's state, or an error naming the valid range.
func (l *library) device(i int) (*devState, error) {
	if i < 0 || i >= len(l.devs) {
		return nil, fmt.Errorf("device %d does not exist: this process has %d CUDA device(s), 0 to %d: %w", i, len(l.devs), len(l.devs)-1, driver.ErrInvalidValue)
	}
	return &l.devs[i], nil
}

// alloc allocates size bytes on device for the work of the stream the
// caller's handle names (0: the legacy default stream). size 0 returns 0
// and no error.
func (l *library) alloc(size uint64, device int, handle uintptr) (uintptr, error) {
	d, err := l.device(device)
	if err != nil {
		return 0, err
	}
	if size == 0 {
		return 0, nil
	}
	s, err := cuda.ForeignStream(d.dev, handle)
	if err != nil {
		return 0, err
	}
	p, err := d.res.Alloc(size, s)
	if err != nil {
		return 0, err
	}
	sh := &l.live[shardOf(uintptr(p))]
	sh.mu.Lock()
	sh.m[uintptr(p)] = liveAlloc{dev: device, size: size, handle: handle}
	sh.mu.Unlock()
	return uintptr(p), nil
}

// free frees p, which alloc returned for device. With checkSize, size must
// be the size it was allocated with (PyTorch passes it; CuPy does not).
// When the caller frees on another stream than it allocated on, the block
// is noted as used on that stream too, so that its reuse waits for both.
// A bad call (p unknown, or of another device, or a wrong size) changes
// nothing.
func (l *library) free(p uintptr, size uint64, checkSize bool, device int, handle uintptr) error {
	d, err := l.device(device)
	if err != nil {
		return err
	}
	if p == 0 {
		return nil
	}
	sh := &l.live[shardOf(p)]
	sh.mu.Lock()
	la, ok := sh.m[p]
	switch {
	case !ok:
		err = fmt.Errorf("free %#x on device %d: not a live allocation of this library (unknown pointer or double free): %w", p, device, driver.ErrInvalidPointer)
	case la.dev != device:
		err = fmt.Errorf("free %#x on device %d: it was allocated on device %d: %w", p, device, la.dev, driver.ErrInvalidValue)
	case checkSize && la.size != size:
		err = fmt.Errorf("free %#x on device %d with size %d: it was allocated with size %d: %w", p, device, size, la.size, driver.ErrInvalidValue)
	default:
		delete(sh.m, p) // taken: a concurrent free of p finds it gone
	}
	sh.mu.Unlock()
	if err != nil {
		return err
	}
	if handle != la.handle {
		err = l.recordOn(d, p, handle)
	}
	if err == nil {
		err = d.res.Free(driver.Ptr(p))
	}
	if err != nil { // the block is still live and the caller's
		sh.mu.Lock()
		sh.m[p] = la
		sh.mu.Unlock()
	}
	return err
}

func (l *library) recordOn(d *devState, p uintptr, handle uintptr) error {
	s, err := cuda.ForeignStream(d.dev, handle)
	if err != nil {
		return err
	}
	return d.res.RecordStream(driver.Ptr(p), s)
}

// devices returns device i, or every device for -1.
func (l *library) devices(i int) ([]devState, error) {
	if i == -1 {
		return l.devs, nil
	}
	d, err := l.device(i)
	if err != nil {
		return nil, err
	}
	return []devState{*d}, nil
}

// emptyCache releases the cached memory of device i (-1: all devices).
func (l *library) emptyCache(i int) error {
	ds, err := l.devices(i)
	if err != nil {
		return err
	}
	var errs []error
	for _, d := range ds {
		errs = append(errs, d.res.EmptyCache())
	}
	return errors.Join(errs...)
}

// statsJSON is device i's statistics as one JSON object with PyTorch's
// memory_stats names ("allocated_bytes.all.current", ...).
func (l *library) statsJSON(i int) ([]byte, error) {
	d, err := l.device(i)
	if err != nil {
		return nil, err
	}
	return json.Marshal(d.res.Stats().Map())
}

// caching returns device i's caching allocator, or an error for
// backend:passthrough, which has no cache to cap or snapshot.
func (l *library) caching(i int, op string) (*devalloc.Allocator, error) {
	d, err := l.device(i)
	if err != nil {
		return nil, err
	}
	if d.a == nil {
		return nil, fmt.Errorf("%s: device %d uses backend:passthrough (%s), which has no cache: %w", op, i, devalloc.EnvConfig, driver.ErrNotSupported)
	}
	return d.a, nil
}

// setMemoryFraction caps device i's reserved memory at fraction f of its
// total, as torch.cuda.set_per_process_memory_fraction(f, i).
func (l *library) setMemoryFraction(f float64, i int) error {
	a, err := l.caching(i, "set memory fraction")
	if err != nil {
		return err
	}
	return a.SetMemoryFraction(f)
}

// resetPeakStats sets device i's peaks to their current values.
func (l *library) resetPeakStats(i int) error {
	a, err := l.caching(i, "reset peak stats")
	if err != nil {
		return err
	}
	a.ResetPeakStats()
	return nil
}

// snapshot writes device i's memory snapshot to path in the pickle form
// torch.cuda.memory._dump_snapshot writes and memory_viz opens, through a
// temporary file renamed into place (atomicfile: a symbolic link or other
// non-regular file at path is refused, never written through).
func (l *library) snapshot(i int, path string) error {
	a, err := l.caching(i, "snapshot")
	if err != nil {
		return err
	}
	if path == "" {
		return fmt.Errorf("snapshot: empty path; give the file to write, e.g. snapshot.pickle: %w", driver.ErrInvalidValue)
	}
	return atomicfile.WriteFile(path, 0o600, a.Snapshot().WritePickle)
}
