package backendkit

import "github.com/accelkit/accelkit/driver"

//go:generate go run ./internal/gencompose

// Composing a device from its capabilities. A backend's device type often
// implements every optional capability (sim's does whatever its
// configuration), yet a device without VMM must not satisfy VMM at all: a
// caller asks `dev.(driver.VMM)` and must get false, not a method that
// fails. Compose builds the value a backend hands out so that its dynamic
// type offers exactly the capabilities the device has (the io/fs pattern),
// one set of wrapper types for every backend.
//
// A dynamic type's method set is fixed, so each subset of the
// capabilities needs a type of its own: 2^n - 1 wrappers for n
// capabilities (31 for five), which nobody should write or review by hand,
// and reflection cannot make them (reflect.StructOf promotes no methods).
// They are generated instead, with the two functions that depend on the
// list (offersExactly, wrap), from the Capabilities struct below by
// internal/gencompose into compose_wrappers.go; that package's test fails
// when the file is stale. Adding a capability is a field here and `go
// generate`.

// Capabilities are the optional interfaces one device offers beside Device.
// A nil field means the device does not offer that capability.
type Capabilities struct {
	VMM          driver.VMM
	Peer         driver.Peer
	Properties   driver.PropertiesDevice
	HostRegister driver.HostRegisterDevice
	Launcher     driver.Launcher
}

// Compose returns the Device a backend hands out for base. It behaves as
// base for every Device method, and its dynamic type satisfies VMM, Peer,
// PropertiesDevice, HostRegisterDevice and Launcher exactly when caps
// holds them, whatever methods base's own type has, so callers keep
// discovering capabilities by type assertion (dev.(driver.VMM),
// driver.AsVMM, driver.AsHostRegister, driver.AsLauncher).
//
// When base's own type already offers exactly caps, each implemented by
// base itself, Compose returns base: no wrapper, no extra call. Otherwise
// it returns a new wrapper, which Unwrap opens to base: that is how a
// backend, or a test looking for hooks such as drivertest.Faults, reaches
// the device behind the value. Callers compare devices with ==, so base
// must be comparable (a pointer, typically), and a backend composes once
// per device and returns that one value from Driver.Device, Stream.Device,
// Event.Device and HostBuffer.Device.
func Compose(base driver.Device, caps Capabilities) driver.Device {
	if offersExactly(base, caps) {
		return base
	}
	return wrap(composed{base}, caps)
}

// Unwrap returns the device a Compose wrapper was built on, or nil when
// dev is not such a wrapper (Compose may return base itself).
func Unwrap(dev driver.Device) driver.Device {
	if u, ok := dev.(interface{ Unwrap() driver.Device }); ok {
		return u.Unwrap()
	}
	return nil
}

// composed carries the base device. Its Device field is an interface, so
// only Device's methods are promoted: whatever else base implements stays
// hidden.
type composed struct{ driver.Device }

// Unwrap returns the base device.
func (c *composed) Unwrap() driver.Device { return c.Device }
