package sim

import (
	"errors"
	"fmt"
	"math/bits"
	"runtime"
	"strconv"
	"sync"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/backendkit"
)

// Defaults of Config and of the DSN keys.
const (
	// DefaultCapacity is the memory of each simulated device: a common
	// data-centre GPU size, reserved lazily (only touched pages cost RAM).
	DefaultCapacity = 8 << 30
	// DefaultGranularity is the VMM page, CUDA's minimum granularity on
	// current GPUs.
	DefaultGranularity = 2 << 20
	// maxDevices bounds the DSN's device count; each device costs a stream
	// goroutine and some bookkeeping.
	maxDevices = 1024
)

// Version is reported by (*Driver).Version.
const Version = "sim 1.0"

// dsnKeys are the keys Open accepts.
var dsnKeys = []string{"devices", "capacity", "vmm", "granularity", "peer", "hostregister", "launcher"}

// Config configures a simulated driver.
type Config struct {
	Devices     int    // number of devices; 0 means 1
	Capacity    uint64 // bytes of device memory per device; 0 means DefaultCapacity
	VMM         bool   // offer driver.VMM
	Granularity uint64 // VMM page size, a power of two >= the OS page; 0 means DefaultGranularity
	Peer        bool   // offer driver.Peer between devices
	// HostRegister offers driver.HostRegisterDevice: registering host
	// memory the caller owns as pinned, in place.
	HostRegister bool
	// Launcher offers driver.Launcher: loading PTX modules and launching
	// their kernels, each run by the Go function registered under its name
	// (RegisterKernel).
	Launcher bool
}

// DefaultConfig is the configuration of Open(""): one 8 GiB device with VMM
// (2 MiB granularity), peer access, host registration and kernel launches. VMM is on where
// the sim can offer it: on Linux, macOS and FreeBSD, not on Windows.
func DefaultConfig() Config { return defaultConfig(vmmAvailable) }

func defaultConfig(vmm bool) Config {
	return Config{Devices: 1, Capacity: DefaultCapacity, VMM: vmm, Granularity: DefaultGranularity, Peer: true, HostRegister: true, Launcher: true}
}

func init() {
	driver.RegisterBackend(driver.Backend{
		Name: "sim",
		Open: func(dsn string) (driver.Driver, error) {
			d, err := Open(dsn)
			if err != nil {
				return nil, err
			}
			return d, nil
		},
		Probe:      probe,
		Preference: driver.PreferSimulated,
	})
}

// probe is the sim's driver.Prober: a simulated device is always there, so
// only a dsn Open would refuse stops it.
func probe(dsn string) error {
	cfg, err := parseConfig(dsn, vmmAvailable)
	if err != nil {
		return err
	}
	return cfg.check(vmmAvailable)
}

// Open opens a simulated driver configured by dsn, a comma-separated list of
// key=value: devices (default 1), capacity (bytes per device, such as
// "64MiB"; default 8GiB), vmm (default true), granularity (default 2MiB),
// peer (default true), hostregister (default true) and launcher (default
// true). An empty dsn gives
// DefaultConfig. Where the sim
// offers no VMM (Windows), vmm defaults to false and vmm=true is an error
// wrapping driver.ErrNotSupported.
func Open(dsn string) (*Driver, error) { return open(dsn, vmmAvailable) }

// open is Open on a platform that can (vmmOK) or cannot offer VMM.
func open(dsn string, vmmOK bool) (*Driver, error) {
	cfg, err := parseConfig(dsn, vmmOK)
	if err != nil {
		return nil, err
	}
	return newDriver(cfg, vmmOK)
}

// parseConfig reads dsn, defaults filled in for a platform that can
// (vmmOK) or cannot offer VMM.
func parseConfig(dsn string, vmmOK bool) (Config, error) {
	d, err := backendkit.ParseDSN("sim", dsn, dsnKeys)
	if err != nil {
		return Config{}, err
	}
	def := defaultConfig(vmmOK)
	cfg := Config{}
	var errs []error
	var e error
	cfg.Devices, e = d.Int("devices", def.Devices, 1, maxDevices)
	errs = append(errs, e)
	cfg.Capacity, e = d.Bytes("capacity", def.Capacity)
	errs = append(errs, e)
	cfg.VMM, e = d.Bool("vmm", def.VMM)
	errs = append(errs, e)
	cfg.Granularity, e = d.Bytes("granularity", def.Granularity)
	errs = append(errs, e)
	cfg.Peer, e = d.Bool("peer", def.Peer)
	errs = append(errs, e)
	cfg.HostRegister, e = d.Bool("hostregister", def.HostRegister)
	errs = append(errs, e)
	cfg.Launcher, e = d.Bool("launcher", def.Launcher)
	errs = append(errs, e)
	if err := errors.Join(errs...); err != nil {
		return Config{}, fmt.Errorf("sim dsn %q: %w", dsn, err)
	}
	if _, ok := d["capacity"]; ok && cfg.Capacity == 0 {
		return Config{}, fmt.Errorf("sim dsn %q: capacity must be at least 1 byte: %w", dsn, driver.ErrInvalidValue)
	}
	if _, ok := d["granularity"]; ok && cfg.Granularity == 0 {
		return Config{}, fmt.Errorf("sim dsn %q: granularity must be a power of two >= %d: %w", dsn, pageSize, driver.ErrInvalidValue)
	}
	return cfg, nil
}

// Driver is an opened simulated backend. It is safe for concurrent use.
type Driver struct {
	// Locking: mu guards closed; devices is immutable after New. regMu
	// serialises HostRegister across the devices, so that the overlap check
	// against every device's host table and the insert are one step; it is
	// taken before a table's mu and never while holding a device's or a
	// stream's mu.

	cfg     Config
	devices []*Device
	mu      sync.Mutex
	closed  bool
	regMu   sync.Mutex
}

// New opens a simulated driver with cfg. Zero Devices, Capacity and
// Granularity take their defaults; VMM, Peer, HostRegister and Launcher are
// taken as given (start from DefaultConfig to get them on). VMM where the sim cannot offer it
// (Windows) is an error wrapping driver.ErrNotSupported.
func New(cfg Config) (*Driver, error) { return newDriver(cfg, vmmAvailable) }

// newDriver is New on a platform that can (vmmOK) or cannot offer VMM.
func newDriver(cfg Config, vmmOK bool) (*Driver, error) {
	cfg = cfg.withDefaults()
	if err := cfg.check(vmmOK); err != nil {
		return nil, err
	}
	drv := &Driver{cfg: cfg}
	for i := range cfg.Devices {
		drv.devices = append(drv.devices, newDevice(drv, i))
	}
	return drv, nil
}

// withDefaults fills in the zero Devices, Capacity and Granularity.
func (cfg Config) withDefaults() Config {
	if cfg.Devices == 0 {
		cfg.Devices = 1
	}
	if cfg.Capacity == 0 {
		cfg.Capacity = DefaultCapacity
	}
	if cfg.Granularity == 0 {
		cfg.Granularity = DefaultGranularity
	}
	return cfg
}

// check validates cfg, defaults filled in, for a platform that can (vmmOK)
// or cannot offer VMM.
func (cfg Config) check(vmmOK bool) error {
	cfg = cfg.withDefaults()
	switch {
	case cfg.Devices < 0 || cfg.Devices > maxDevices:
		return fmt.Errorf("sim: %d devices: want 1 to %d: %w", cfg.Devices, maxDevices, driver.ErrInvalidValue)
	case bits.OnesCount64(cfg.Granularity) != 1 || cfg.Granularity < pageSize:
		return fmt.Errorf("sim: granularity %d: want a power of two >= the page size %d: %w", cfg.Granularity, pageSize, driver.ErrInvalidValue)
	case cfg.VMM && !vmmOK:
		return fmt.Errorf("sim: vmm=true: the sim offers no VMM on %s (it maps shared memory at fixed addresses only on Linux, macOS and FreeBSD); use vmm=false: %w",
			runtime.GOOS, driver.ErrNotSupported)
	}
	return nil
}

// Config returns the configuration the driver was opened with, defaults
// filled in.
func (drv *Driver) Config() Config { return drv.cfg }

// Name returns "sim".
func (drv *Driver) Name() string { return "sim" }

// Version returns Version.
func (drv *Driver) Version() string { return Version }

// DeviceCount returns the number of devices.
func (drv *Driver) DeviceCount() int { return len(drv.devices) }

// Device returns device ordinal as a driver.Device whose dynamic type offers
// driver.VMM, driver.Peer and driver.HostRegisterDevice only when
// configured; Hooks reaches its *Device.
func (drv *Driver) Device(ordinal int) (driver.Device, error) {
	if drv.isClosed() {
		return nil, backendkit.ClosedError("sim", "Device("+strconv.Itoa(ordinal)+")")
	}
	if err := backendkit.CheckOrdinal("sim", ordinal, len(drv.devices)); err != nil {
		return nil, err
	}
	return drv.devices[ordinal].state.Public, nil
}

func (drv *Driver) isClosed() bool {
	drv.mu.Lock()
	defer drv.mu.Unlock()
	return drv.closed
}

// Close stops every stream (queued work that has not run is dropped),
// unmaps all device, host and VMM memory, ends every host registration
// (unpinning its memory, which stays the caller's) and makes every later
// call fail with driver.ErrClosed. Slices from the Bytes of HostAlloc
// buffers must not be used after Close. Close is idempotent: a second call returns nil and does nothing.
func (drv *Driver) Close() error {
	drv.mu.Lock()
	if drv.closed {
		drv.mu.Unlock()
		return nil
	}
	drv.closed = true
	drv.mu.Unlock()
	for _, d := range drv.devices {
		d.state.Close()
		d.abort()
	}
	var errs []error
	for _, d := range drv.devices {
		errs = append(errs, d.shutdown())
	}
	return errors.Join(errs...)
}
