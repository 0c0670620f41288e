//go:build linux && cgo

package cuda

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"

	"github.com/accelkit/accelkit/driver"
)

// vmmOps is driver.VMM for a device whose library has every VMM entry point
// and whose CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED is 1.
// Physical memory is CU_MEM_ALLOCATION_TYPE_PINNED on the device, without
// shareable handles; access is read-write for the device.
type vmmOps struct{ d *device }

// Granularity is the minimum granularity cuMemGetAllocationGranularity
// reported at Open.
func (v vmmOps) Granularity() uint64 { return v.d.granularity }

// multiple checks n before the driver sees it, for a message that says what
// is valid.
func (v vmmOps) multiple(op, what string, n uint64, zeroOK bool) error {
	return v.d.state.CheckGranularity(op, what, n, v.d.granularity, zeroOK)
}

// AddressReserve reserves size bytes of virtual address space aligned to
// alignment (0: the granularity; otherwise a power of two).
func (v vmmOps) AddressReserve(size, alignment uint64) (driver.Ptr, error) {
	const op = "AddressReserve"
	if err := v.d.state.Check(op); err != nil {
		return 0, err
	}
	if err := v.multiple(op, "size", size, false); err != nil {
		return 0, err
	}
	if err := v.d.state.CheckAlignment(op, alignment); err != nil {
		return 0, err
	}
	var p C.CUdeviceptr
	if err := v.d.result("cuMemAddressReserve", C.ak_addr_reserve(v.d.l, v.d.ctx, C.size_t(size), C.size_t(alignment), &p)); err != nil {
		return 0, err
	}
	return driver.Ptr(p), nil
}

// AddressFree releases a whole reservation; nothing may be mapped in it.
func (v vmmOps) AddressFree(p driver.Ptr, size uint64) error {
	if err := v.d.state.Check("AddressFree"); err != nil {
		return err
	}
	return v.d.result("cuMemAddressFree", C.ak_addr_free(v.d.l, v.d.ctx, C.CUdeviceptr(p), C.size_t(size)))
}

// MemCreate creates size bytes of physical memory on the device.
func (v vmmOps) MemCreate(size uint64) (driver.MemHandle, error) {
	const op = "MemCreate"
	if err := v.d.state.Check(op); err != nil {
		return 0, err
	}
	if err := v.multiple(op, "size", size, false); err != nil {
		return 0, err
	}
	var h C.CUmemGenericAllocationHandle
	if err := v.d.result("cuMemCreate", C.ak_mem_create(v.d.l, v.d.ctx, v.d.cu, C.size_t(size), &h)); err != nil {
		return 0, err
	}
	return driver.MemHandle(h), nil
}

// MemRelease releases h; CUDA frees the memory once no mapping uses it.
func (v vmmOps) MemRelease(h driver.MemHandle) error {
	if err := v.d.state.Check("MemRelease"); err != nil {
		return err
	}
	return v.d.result("cuMemRelease", C.ak_mem_release(v.d.l, v.d.ctx, C.CUmemGenericAllocationHandle(h)))
}

// MemMap maps [offset, offset+size) of h at p, inside a reservation.
func (v vmmOps) MemMap(p driver.Ptr, size, offset uint64, h driver.MemHandle) error {
	const op = "MemMap"
	if err := v.d.state.Check(op); err != nil {
		return err
	}
	if err := v.multiple(op, "size", size, false); err != nil {
		return err
	}
	if err := v.multiple(op, "offset", offset, true); err != nil {
		return err
	}
	return v.d.result("cuMemMap", C.ak_mem_map(v.d.l, v.d.ctx, C.CUdeviceptr(p), C.size_t(size), C.size_t(offset), C.CUmemGenericAllocationHandle(h)))
}

// MemUnmap unmaps [p, p+size), which must cover whole mappings.
func (v vmmOps) MemUnmap(p driver.Ptr, size uint64) error {
	if err := v.d.state.Check("MemUnmap"); err != nil {
		return err
	}
	return v.d.result("cuMemUnmap", C.ak_mem_unmap(v.d.l, v.d.ctx, C.CUdeviceptr(p), C.size_t(size)))
}

// SetAccess grants the device read-write access to the mapped [p, p+size).
func (v vmmOps) SetAccess(p driver.Ptr, size uint64) error {
	if err := v.d.state.Check("SetAccess"); err != nil {
		return err
	}
	return v.d.result("cuMemSetAccess", C.ak_set_access(v.d.l, v.d.ctx, v.d.cu, C.CUdeviceptr(p), C.size_t(size)))
}

// peerOps is driver.Peer for devices whose library has the peer entry
// points (cuDeviceCanAccessPeer, cuCtxEnablePeerAccess, cuMemcpyPeerAsync).
type peerOps struct{ d *device }

// peerOf resolves another device of the same driver.
func (o peerOps) peerOf(op string, peer driver.Device) (*device, error) {
	if err := o.d.state.Check(op); err != nil {
		return nil, err
	}
	pd := asDevice(peer)
	if pd == nil || pd.drv != o.d.drv {
		return nil, fmt.Errorf("cuda device %d: %s: device %T is not a device of this cuda driver: %w", o.d.ordinal, op, peer, driver.ErrInvalidValue)
	}
	return pd, nil
}

// CanAccessPeer reports whether this device can access peer's memory
// (false for the device itself, as CUDA reports).
func (o peerOps) CanAccessPeer(peer driver.Device) (bool, error) {
	const op = "CanAccessPeer"
	pd, err := o.peerOf(op, peer)
	if err != nil {
		return false, err
	}
	var can C.int
	if err := o.d.result("cuDeviceCanAccessPeer", C.ak_can_access_peer(o.d.l, o.d.cu, pd.cu, &can)); err != nil {
		return false, err
	}
	return can != 0, nil
}

// EnablePeerAccess lets this device access peer's memory. Enabling it again
// is not an error.
func (o peerOps) EnablePeerAccess(peer driver.Device) error {
	const op = "EnablePeerAccess"
	pd, err := o.peerOf(op, peer)
	if err != nil {
		return err
	}
	if pd == o.d {
		return fmt.Errorf("cuda device %d: %s: a device cannot be its own peer: %w", o.d.ordinal, op, driver.ErrInvalidValue)
	}
	r := C.ak_enable_peer(o.d.l, o.d.ctx, pd.ctx)
	if r == errPeerAccessAlreadyEnabled {
		return nil
	}
	return o.d.result("cuCtxEnablePeerAccess", r)
}

// CopyPeer copies n bytes from src on srcDev to dst on this device, ordered
// on s, a stream of this device.
func (o peerOps) CopyPeer(dst, src driver.Ptr, srcDev driver.Device, n uint64, s driver.Stream) error {
	const op = "CopyPeer"
	sd, err := o.peerOf(op, srcDev)
	if err != nil {
		return err
	}
	st, err := o.d.stream(s, op)
	if err != nil || n == 0 {
		return err
	}
	if err := sd.state.Check(op); err != nil {
		return err
	}
	return o.d.result("cuMemcpyPeerAsync", C.ak_copy_peer(o.d.l, o.d.ctx, C.CUdeviceptr(dst), C.CUdeviceptr(src), sd.ctx, C.size_t(n), st.h))
}
