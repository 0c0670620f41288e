package capi

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

// Library is the allocator state of a process: a driver/cuda driver and
// one devalloc resource per device, fixed at Open. The C library
// (cmd/accelkit_alloc) holds one for the process. Safe for concurrent use.
type Library struct {
	// Locking: drv, cfg and devs are fixed at Open; each live shard's
	// mutex guards its map and is never held across an allocator or
	// driver call.
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

// Open opens driver/cuda (dsn as cuda.Open takes it: "" loads
// $ACCELKIT_LIBCUDA, else libcuda.so.1) and a devalloc resource per
// device with cfg (devalloc.Open: backend:passthrough gives the uncached
// one).
func Open(dsn string, cfg devalloc.Config) (*Library, error) {
	drv, err := cuda.Open(dsn)
	if err != nil {
		return nil, err
	}
	l := &Library{drv: drv, cfg: cfg}
	for i := range l.live {
		l.live[i].m = map[uintptr]liveAlloc{}
	}
	for i := range drv.DeviceCount() {
		dev, err := drv.Device(i)
		if err != nil {
			return nil, errors.Join(err, l.Close())
		}
		res, err := devalloc.Open(dev, cfg)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("device %d: %w", i, err), l.Close())
		}
		a, _ := res.(*devalloc.Allocator)
		l.devs = append(l.devs, devState{dev: dev, res: res, a: a})
	}
	return l, nil
}

// Close closes the resources and the driver. The C library never calls
// it: it lives as long as the process.
func (l *Library) Close() error {
	var errs []error
	for _, d := range l.devs {
		errs = append(errs, d.res.Close())
	}
	return errors.Join(append(errs, l.drv.Close())...)
}

// device returns device i's state, or an error naming the valid range.
func (l *Library) device(i int) (*devState, error) {
	if i < 0 || i >= len(l.devs) {
		return nil, fmt.Errorf("device %d does not exist: this process has %d CUDA device(s), 0 to %d: %w", i, len(l.devs), len(l.devs)-1, driver.ErrInvalidValue)
	}
	return &l.devs[i], nil
}

// Alloc allocates size bytes on device for the work of the stream the
// caller's handle names (0: the legacy default stream). size 0 returns 0
// and no error.
func (l *Library) Alloc(size uint64, device int, handle uintptr) (uintptr, error) {
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

// Free frees p, which Alloc returned for device and size, as PyTorch's
// free does; handle is the stream it names. A bad call (p unknown or
// already freed, another device's, a wrong size, a device that does not
// exist) is an error and changes nothing.
func (l *Library) Free(p uintptr, size uint64, device int, handle uintptr) error {
	return l.release(p, size, true, device, handle)
}

// FreeUnsized frees p as CuPy's free does, without a size.
func (l *Library) FreeUnsized(p uintptr, device int, handle uintptr) error {
	return l.release(p, 0, false, device, handle)
}

// release frees p, which Alloc returned for device. With checkSize, size must
// be the size it was allocated with (PyTorch passes it; CuPy does not).
// When the caller frees on another stream than it allocated on, the block
// is noted as used on that stream too, so that its reuse waits for both.
// A bad call (p unknown, or of another device, or a wrong size) changes
// nothing.
func (l *Library) release(p uintptr, size uint64, checkSize bool, device int, handle uintptr) error {
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

func (l *Library) recordOn(d *devState, p uintptr, handle uintptr) error {
	s, err := cuda.ForeignStream(d.dev, handle)
	if err != nil {
		return err
	}
	return d.res.RecordStream(driver.Ptr(p), s)
}

// DeviceCount returns the number of devices.
func (l *Library) DeviceCount() int { return len(l.devs) }

// devices returns device i, or every device for -1.
func (l *Library) devices(i int) ([]devState, error) {
	if i == -1 {
		return l.devs, nil
	}
	d, err := l.device(i)
	if err != nil {
		return nil, err
	}
	return []devState{*d}, nil
}

// EmptyCache releases the cached memory of device i (-1: all devices).
func (l *Library) EmptyCache(i int) error {
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

// StatsJSON is device i's statistics as one JSON object with PyTorch's
// memory_stats names ("allocated_bytes.all.current", ...).
func (l *Library) StatsJSON(i int) ([]byte, error) {
	d, err := l.device(i)
	if err != nil {
		return nil, err
	}
	return json.Marshal(d.res.Stats().Map())
}

// caching returns device i's caching allocator, or an error for
// backend:passthrough, which has no cache to cap or snapshot.
func (l *Library) caching(i int, op string) (*devalloc.Allocator, error) {
	d, err := l.device(i)
	if err != nil {
		return nil, err
	}
	if d.a == nil {
		return nil, fmt.Errorf("%s: device %d uses backend:passthrough (%s), which has no cache: %w", op, i, devalloc.EnvConfig, driver.ErrNotSupported)
	}
	return d.a, nil
}

// SetMemoryFraction caps device i's reserved memory at fraction f of its
// total, as torch.cuda.set_per_process_memory_fraction(f, i).
func (l *Library) SetMemoryFraction(f float64, i int) error {
	a, err := l.caching(i, "set memory fraction")
	if err != nil {
		return err
	}
	return a.SetMemoryFraction(f)
}

// ResetPeakStats sets device i's peaks to their current values.
func (l *Library) ResetPeakStats(i int) error {
	a, err := l.caching(i, "reset peak stats")
	if err != nil {
		return err
	}
	a.ResetPeakStats()
	return nil
}

// Snapshot writes device i's memory snapshot to path in the pickle form
// torch.cuda.memory._dump_snapshot writes and memory_viz opens, through a
// temporary file renamed into place (atomicfile: a symbolic link or other
// non-regular file at path is refused, never written through).
func (l *Library) Snapshot(i int, path string) error {
	a, err := l.caching(i, "snapshot")
	if err != nil {
		return err
	}
	if path == "" {
		return fmt.Errorf("snapshot: empty path; give the file to write, e.g. snapshot.pickle: %w", driver.ErrInvalidValue)
	}
	return atomicfile.WriteFile(path, 0o600, a.Snapshot().WritePickle)
}
