package sim

// Host registration (driver.HostRegisterDevice): the caller's memory
// counts as pinned in place. A registration is a region of the device's
// host table like a HostAlloc buffer, so the async copies' pinned check and
// their acquire at run time treat both alike; it maps nothing, and it pins
// the Go memory (runtime.Pinner) until HostUnregister or Close.

import (
	"fmt"
	"strconv"
	"unsafe"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/backendkit"
)

// hostRegisterCheck reports why op cannot run on a device reached through
// Hooks although the Config has HostRegister off; the handed-out device
// does not offer the methods then.
func (d *Device) hostRegisterCheck(op string) error {
	if !d.cfg.HostRegister {
		return fmt.Errorf("sim device %d: %s: host registration is off for this driver (dsn hostregister=false): %w",
			d.ordinal, op, driver.ErrNotSupported)
	}
	return nil
}

// HostRegister registers mem, memory the caller owns, as pinned host memory
// of d, in place, and returns a HostBuffer over exactly mem. mem's Go
// memory is pinned (runtime.Pinner) until HostUnregister or Close, and
// nothing is copied or mapped. mem must not overlap a registration of any
// device of the driver nor a HostAlloc buffer (driver.ErrAlreadyRegistered),
// the rule the cuda backend keeps too, CUDA's registry of host ranges being
// shared by its contexts; async copies from and to it are accepted on d
// only.
func (d *Device) HostRegister(mem []byte) (*driver.HostBuffer, error) {
	const op = "HostRegister"
	if err := d.state.CheckHostRegister(mem); err != nil {
		return nil, err
	}
	if err := d.hostRegisterCheck(op); err != nil {
		return nil, err
	}
	if err := d.fault(op, true); err != nil {
		return nil, err
	}
	p, n := hostAddr(mem)
	r := &region{base: p, size: n, kind: kindRegistered}
	r.buf = driver.NewHostBuffer(d.state.Public, mem[:n:n], r)

	d.drv.regMu.Lock()
	defer d.drv.regMu.Unlock()
	for _, o := range d.drv.devices {
		o.host.mu.Lock()
		hit := o.host.overlapLocked(p, n)
		var what string
		if hit != nil {
			what = "a HostAlloc buffer"
			if hit.kind == kindRegistered {
				what = "a registration"
			}
			what += " of sim device " + strconv.Itoa(o.ordinal)
		}
		o.host.mu.Unlock()
		if hit != nil {
			return nil, d.state.RegisterOverlapError(mem, uintptr(hit.base), uintptr(hit.end()), what)
		}
	}
	// Pinned before a copy can find it in the table.
	r.pin.Pin(unsafe.SliceData(mem))
	d.host.mu.Lock()
	ok := d.host.insertLocked(r)
	d.host.mu.Unlock()
	if !ok { // Close drained the table meanwhile
		r.pin.Unpin()
		return nil, d.state.Check(op)
	}
	d.stats.hostRegisters.Add(1)
	return r.buf, nil
}

// HostUnregister ends a registration: its memory is ordinary Go memory
// again, unpinned. It waits for copies running on the range; copies still
// queued on it fail when they run, as after HostFree (driver.ErrNotPinned,
// sticky on their stream), so a caller must synchronise them first.
func (d *Device) HostUnregister(b *driver.HostBuffer) error {
	const op = "HostUnregister"
	r, ok, err := backendkit.HostRegistrationState[*region](&d.state, b)
	if !ok {
		return err
	}
	if err := d.hostRegisterCheck(op); err != nil {
		return err
	}
	if r.kind != kindRegistered { // fixed at HostAlloc: no lock needed
		return d.state.NotRegisteredError(b, "is a HostAlloc buffer (release it with HostFree)")
	}
	d.host.mu.Lock()
	switch {
	case r.dead:
		d.host.mu.Unlock()
		if err := d.state.Check(op); err != nil { // Close ended it meanwhile
			return err
		}
		return d.state.NotRegisteredError(b, "was unregistered already")
	case d.host.findLocked(r.base) != r:
		d.host.mu.Unlock()
		return d.state.NotRegisteredError(b, "is not a live registration of this device")
	}
	d.host.removeLocked(r) // waits for the copies running on it
	d.host.mu.Unlock()
	r.pin.Unpin()
	d.stats.hostUnregisters.Add(1)
	return nil
}
