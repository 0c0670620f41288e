package driver

// Composing a device from its capabilities. A backend's device type often
// implements every optional capability (sim's does whatever its
// configuration), yet a device without VMM must not satisfy VMM at all: a
// caller asks `dev.(driver.VMM)` and must get false, not a method that
// fails. Compose builds the value a backend hands out so that its dynamic
// type offers exactly the capabilities the device has (the io/fs pattern),
// one set of wrapper types for every backend.

// Capabilities are the optional interfaces one device offers beside Device.
// A nil field means the device does not offer that capability.
type Capabilities struct {
	VMM        VMM
	Peer       Peer
	Properties PropertiesDevice
}

// Compose returns the Device a backend hands out for base. It behaves as
// base for every Device method, and its dynamic type satisfies VMM, Peer
// and PropertiesDevice exactly when caps holds them, whatever methods
// base's own type has, so callers keep discovering capabilities by type
// assertion (dev.(driver.VMM), AsVMM).
//
// When base's own type already offers exactly caps, each implemented by
// base itself, Compose returns base: no wrapper, no extra call. Otherwise
// it returns a new wrapper, which Unwrap opens to base: that is how a
// backend, or a test looking for hooks such as drivertest.Faults, reaches
// the device behind the value. Callers compare devices with ==, so base
// must be comparable (a pointer, typically), and a backend composes once
// per device and returns that one value from Driver.Device, Stream.Device,
// Event.Device and HostBuffer.Device.
func Compose(base Device, caps Capabilities) Device {
	if offersExactly(base, caps) {
		return base
	}
	b := composed{base}
	switch v, p, r := caps.VMM, caps.Peer, caps.Properties; {
	case v != nil && p != nil && r != nil:
		return &withVMMPeerProps{b, v, p, r}
	case v != nil && p != nil:
		return &withVMMPeer{b, v, p}
	case v != nil && r != nil:
		return &withVMMProps{b, v, r}
	case p != nil && r != nil:
		return &withPeerProps{b, p, r}
	case v != nil:
		return &withVMM{b, v}
	case p != nil:
		return &withPeer{b, p}
	case r != nil:
		return &withProps{b, r}
	}
	return &b
}

// offersExactly reports whether base's own method set offers exactly the
// capabilities in caps, and each of them is base itself.
func offersExactly(base Device, caps Capabilities) bool {
	v, hasV := base.(VMM)
	p, hasP := base.(Peer)
	r, hasR := base.(PropertiesDevice)
	return hasV == (caps.VMM != nil) && (!hasV || caps.VMM == v) &&
		hasP == (caps.Peer != nil) && (!hasP || caps.Peer == p) &&
		hasR == (caps.Properties != nil) && (!hasR || caps.Properties == r)
}

// Unwrap returns the device a Compose wrapper was built on, or nil when
// dev is not such a wrapper (Compose may return base itself).
func Unwrap(dev Device) Device {
	if u, ok := dev.(interface{ Unwrap() Device }); ok {
		return u.Unwrap()
	}
	return nil
}

// composed carries the base device. Its Device field is an interface, so
// only Device's methods are promoted: whatever else base implements stays
// hidden.
type composed struct{ Device }

// Unwrap returns the base device.
func (c *composed) Unwrap() Device { return c.Device }

// One type per combination of capabilities: a dynamic type's method set is
// fixed, so each combination needs its own.
type (
	withVMM struct {
		composed
		VMM
	}
	withPeer struct {
		composed
		Peer
	}
	withProps struct {
		composed
		PropertiesDevice
	}
	withVMMPeer struct {
		composed
		VMM
		Peer
	}
	withVMMProps struct {
		composed
		VMM
		PropertiesDevice
	}
	withPeerProps struct {
		composed
		Peer
		PropertiesDevice
	}
	withVMMPeerProps struct {
		composed
		VMM
		Peer
		PropertiesDevice
	}
)
