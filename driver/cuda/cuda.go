//go:build linux && cgo

package cuda

/*
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/backendkit"
)

func init() {
	driver.RegisterBackend(driver.Backend{Name: "cuda", Open: Open, Probe: probe, Preference: driver.PreferHardware})
}

// dsnKeys are the keys Open accepts.
var dsnKeys = []string{"lib"}

// Open opens the CUDA backend. dsn is empty or "lib=PATH", PATH naming the
// driver library to load (default: $ACCELKIT_LIBCUDA, else libcuda.so.1).
//
// A library that cannot be loaded is an error wrapping driver.ErrNoDevice
// (the dlerror text and what to set); a library without a required entry
// point wraps driver.ErrNotSupported; a failing cuInit maps its CUresult
// (CUDA_ERROR_NO_DEVICE: driver.ErrNoDevice). Open retains every device's
// primary context; Close releases them.
func Open(dsn string) (driver.Driver, error) { return open(dsn, nil) }

// probe is the backend's driver.Prober: it loads the library (once per
// process, as Open does) and counts the devices, retaining no context.
func probe(dsn string) error {
	l, n, err := devices(dsn)
	if err == nil && n == 0 {
		err = fmt.Errorf("cuda: %s reports no device: %w", l.path, driver.ErrNoDevice)
	}
	return err
}

// devices loads the library dsn names and counts its devices.
func devices(dsn string) (*lib, int, error) {
	cfg, err := backendkit.ParseDSN("cuda", dsn, dsnKeys)
	if err != nil {
		return nil, 0, err
	}
	l, err := loadLib(libraryPath(cfg["lib"]))
	if err != nil {
		return nil, 0, err
	}
	var n C.int
	if r := int(C.ak_device_count(l.c, &n)); r != 0 {
		return nil, 0, fmt.Errorf("cuda: %w", l.error("cuDeviceGetCount", r))
	}
	return l, int(n), nil
}

// open is Open with a hook for the tests: wrap, when not nil, replaces the
// value Driver.Device hands out for each device (it receives the device
// with its own value in pub), so a test can add capabilities such as
// drivertest.Faults while streams and events still report that value.
func open(dsn string, wrap func(*device) driver.Device) (driver.Driver, error) {
	l, n, err := devices(dsn)
	if err != nil {
		return nil, err
	}
	drv := &cudaDriver{lib: l}
	for i := range n {
		d, err := newDevice(drv, i)
		if err != nil {
			// Release the contexts retained so far; a failed release is
			// reported with the error that stopped Open.
			return nil, errors.Join(err, drv.release())
		}
		if wrap != nil {
			d.state.Public = wrap(d)
		}
		drv.devs = append(drv.devs, d)
	}
	return drv, nil
}

// cudaDriver is an opened CUDA backend. Safe for concurrent use.
//
// Locking: devs is fixed at Open and closed is atomic. regMu serialises
// HostRegister and HostUnregister across the devices, and Close's ending
// of the registrations, and guards each device's regs; it is held across
// their driver calls and taken before a device's pinMu.
type cudaDriver struct {
	lib    *lib
	devs   []*device
	closed atomic.Bool
	regMu  sync.Mutex
}

func (drv *cudaDriver) Name() string { return "cuda" }

// Version is "cuda MAJOR.MINOR" of the driver (cuDriverGetVersion).
func (drv *cudaDriver) Version() string { return "cuda " + drv.lib.versionString() }

func (drv *cudaDriver) DeviceCount() int { return len(drv.devs) }

func (drv *cudaDriver) Device(ordinal int) (driver.Device, error) {
	if drv.closed.Load() {
		return nil, backendkit.ClosedError("cuda", "Device("+strconv.Itoa(ordinal)+")")
	}
	if err := backendkit.CheckOrdinal("cuda", ordinal, len(drv.devs)); err != nil {
		return nil, err
	}
	return drv.devs[ordinal].state.Public, nil
}

// Close ends the host registrations still live (unpinning their memory,
// which stays the caller's), unloads the modules still loaded (a CUlibrary
// outlives contexts) and releases the primary contexts Open
// retained; every later call on the driver, its devices, streams and
// events fails with driver.ErrClosed. Memory still allocated goes with the
// context when no one else retains it. Close is idempotent: a second call
// returns nil and does nothing.
func (drv *cudaDriver) Close() error {
	if !drv.closed.CompareAndSwap(false, true) {
		return nil
	}
	for _, d := range drv.devs {
		d.state.Close()
	}
	drv.endRegistrations()
	var unloads []error
	for _, d := range drv.devs {
		unloads = append(unloads, d.unloadAll())
	}
	return errors.Join(append(unloads, drv.release())...)
}

func (drv *cudaDriver) release() error {
	var first error
	for _, d := range drv.devs {
		if r := int(C.ak_release(drv.lib.c, d.cu)); r != 0 && first == nil {
			first = fmt.Errorf("cuda: device %d: %w", d.ordinal, drv.lib.error("cuDevicePrimaryCtxRelease_v2", r))
		}
	}
	return first
}
