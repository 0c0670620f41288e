//go:build linux && cgo

package cuda

/*
#include "shim.h"
*/
import "C"

import (
	"strconv"
	"unsafe"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/backendkit"
)

// hostRegOps is driver.HostRegisterDevice for a device whose library has
// cuMemHostRegister_v2 and cuMemHostUnregister. A registration is flags 0
// (pinned for this device's context only, like cuMemHostAlloc's buffers),
// pins the caller's Go memory with a runtime.Pinner for as long as the
// driver holds its address, and is a range of the device's pins, so the
// async copies' pinned check accepts it as it does a HostAlloc buffer.
type hostRegOps struct{ d *device }

// HostRegister page-locks mem in place (cuMemHostRegister_v2, any byte
// range). Overlaps with the driver's registrations on any device and with
// its HostAlloc buffers are refused here, before the driver call, with
// driver.ErrAlreadyRegistered; CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED
// from the driver (a range registered outside this backend) maps to it
// too.
func (h hostRegOps) HostRegister(mem []byte) (*driver.HostBuffer, error) {
	const op = "HostRegister"
	d := h.d
	if err := d.state.CheckHostRegister(mem); err != nil {
		return nil, err
	}
	d.drv.regMu.Lock()
	defer d.drv.regMu.Unlock()
	// Checked again under regMu: Close marks the devices closed before it
	// takes regMu to end the registrations, so none is added after.
	if err := d.state.Check(op); err != nil {
		return nil, err
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(mem)))
	end := p + uintptr(len(mem))
	for _, o := range d.drv.devs {
		if r, hit := o.pinOverlap(p, end); hit {
			what := "a HostAlloc buffer"
			if r.reg {
				what = "a registration"
			}
			return nil, d.state.RegisterOverlapError(mem, r.base, r.end, what+" of cuda device "+strconv.Itoa(o.ordinal))
		}
	}
	hm := &hostMem{base: unsafe.Pointer(unsafe.SliceData(mem)), size: len(mem), registered: true}
	// Pinned before the driver keeps the address; cgo's rules require it
	// of Go memory that C holds after the call returns.
	hm.pin.Pin(hm.base)
	if err := d.result("cuMemHostRegister_v2", C.ak_host_register(d.l, d.ctx, hm.base, C.size_t(len(mem)))); err != nil {
		hm.pin.Unpin()
		return nil, err
	}
	d.regs[hm] = struct{}{}
	d.addPin(pinRange{base: p, end: end, reg: true})
	return driver.NewHostBuffer(d.state.Public, mem[:len(mem):len(mem)], hm), nil
}

// HostUnregister ends a registration: new async copies on the range are
// refused at once, the device's queued work is waited for
// (cuCtxSynchronize, in the same shim call), then cuMemHostUnregister
// runs and the memory is unpinned. If the wait or the unregistration
// fails, the registration stays live and the error is returned (a lost
// device's registrations end at Close).
func (h hostRegOps) HostUnregister(b *driver.HostBuffer) error {
	const op = "HostUnregister"
	d := h.d
	hm, ok, err := backendkit.HostRegistrationState[*hostMem](&d.state, b)
	if !ok {
		return err
	}
	if !hm.registered {
		return d.state.NotRegisteredError(b, "is a HostAlloc buffer (release it with HostFree)")
	}
	d.drv.regMu.Lock()
	defer d.drv.regMu.Unlock()
	if err := d.state.Check(op); err != nil { // Close ended it meanwhile
		return err
	}
	if _, live := d.regs[hm]; !live {
		return d.state.NotRegisteredError(b, "was unregistered already")
	}
	base := uintptr(hm.base)
	d.dropPin(base)
	if err := d.result("cuMemHostUnregister", C.ak_host_unregister(d.l, d.ctx, hm.base)); err != nil {
		d.addPin(pinRange{base: base, end: base + uintptr(hm.size), reg: true})
		return err
	}
	delete(d.regs, hm)
	hm.pin.Unpin()
	return nil
}

// endRegistrations unregisters and unpins what is still registered, for
// Close (the devices are closed already, so nothing registers meanwhile).
// Failures are not reported: they come from a lost device, and the
// release of the primary context that follows frees its registrations.
func (drv *cudaDriver) endRegistrations() {
	drv.regMu.Lock()
	defer drv.regMu.Unlock()
	for _, d := range drv.devs {
		for hm := range d.regs {
			C.ak_host_unregister(d.l, d.ctx, hm.base)
			d.dropPin(uintptr(hm.base))
			hm.pin.Unpin()
			delete(d.regs, hm)
		}
	}
}
