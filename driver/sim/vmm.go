package sim

import (
	"errors"
	"fmt"
	"os"

	"github.com/accelkit/accelkit/driver"
)

// memHandle is physical memory from MemCreate: a file of size bytes (a
// memfd on Linux, an unlinked temporary file elsewhere; see newPhysMem).
// Its fields are guarded by the device's mu.
type memHandle struct {
	id       driver.MemHandle
	size     uint64
	mem      *os.File // nil once released
	mapped   int      // granules mapped from it
	released bool
}

// closeLocked drops the file; mappings keep the memory until they go.
// Caller holds the device's mu.
func (h *memHandle) closeLocked() {
	if h.mem != nil {
		h.mem.Close()
		h.mem = nil
	}
}

// vmmCheck reports why op cannot run: the device is closed or lost, or
// the Config has VMM off (a *Device reached through Hooks has the methods
// either way).
func (d *Device) vmmCheck(op string) error {
	if err := d.state.Check(op); err != nil {
		return err
	}
	if !d.cfg.VMM {
		return fmt.Errorf("sim device %d: %s: VMM is off for this driver (dsn vmm=false): %w", d.ordinal, op, driver.ErrNotSupported)
	}
	return nil
}

// multiple checks that n is a positive multiple of the granularity.
func (d *Device) multiple(op, what string, n uint64, zeroOK bool) error {
	return d.state.CheckGranularity(op, what, n, d.cfg.Granularity, zeroOK)
}

// Granularity returns the VMM page size (Config.Granularity).
func (d *Device) Granularity() uint64 { return d.cfg.Granularity }

// AddressReserve reserves size bytes of inaccessible address space aligned
// to alignment (0 means the granularity; otherwise a power of two).
func (d *Device) AddressReserve(size, alignment uint64) (driver.Ptr, error) {
	const op = "AddressReserve"
	if err := d.vmmCheck(op); err != nil {
		return 0, err
	}
	if err := d.multiple(op, "size", size, false); err != nil {
		return 0, err
	}
	if err := d.state.CheckAlignment(op, alignment); err != nil {
		return 0, err
	}
	if alignment > 1<<40 {
		return 0, fmt.Errorf("sim device %d: %s: alignment %d is over the sim's limit; want 0 or a power of two up to 1 TiB: %w", d.ordinal, op, alignment, driver.ErrInvalidValue)
	}
	if alignment == 0 {
		alignment = d.cfg.Granularity
	}
	if size > 1<<46 {
		return 0, fmt.Errorf("sim device %d: %s: size %d is over the 64 TiB the sim reserves at once: %w", d.ordinal, op, size, driver.ErrOutOfMemory)
	}
	if err := d.fault(op, true); err != nil {
		return 0, err
	}
	p, err := reserveRange(size, max(alignment, d.cfg.Granularity))
	if err != nil {
		return 0, fmt.Errorf("sim device %d: %s: %w", d.ordinal, op, err)
	}
	r := &region{base: p, size: size, mapped: size, kind: kindReserve, gran: d.cfg.Granularity}
	d.mem.mu.Lock()
	ok := d.mem.insertLocked(r)
	d.mem.mu.Unlock()
	if !ok { // Close ran meanwhile: undo the mapping, reporting a failed munmap too
		return 0, errors.Join(d.state.Check(op), unmap(p, size))
	}
	return driver.Ptr(p), nil
}

// granulesMappedLocked checks that granules [first, last) of r are all
// mapped (want true) or all unmapped. Caller holds d.mem.mu.
func (d *Device) granulesMappedLocked(op string, r *region, first, last int, want bool) error {
	i, found := r.granules.firstWhere(first, last, !want)
	if !found {
		return nil
	}
	state, fix := "not mapped", "MemMap it first"
	if !want {
		state, fix = "already mapped", "MemUnmap it first"
	}
	return fmt.Errorf("sim device %d: %s: granule at %#x is %s; %s: %w",
		d.ordinal, op, r.base+uint64(i)*r.gran, state, fix, driver.ErrInvalidValue)
}

// reservationLocked finds the reservation holding [p, p+size) with
// granule-aligned bounds and returns it with the granules [first, last)
// the range covers. Caller holds d.mem.mu.
func (d *Device) reservationLocked(op string, p driver.Ptr, size uint64) (*region, int, int, error) {
	if err := d.multiple(op, "size", size, false); err != nil {
		return nil, 0, 0, err
	}
	r := d.mem.findLocked(uint64(p))
	if r == nil || r.kind != kindReserve || size > r.end()-uint64(p) {
		return nil, 0, 0, fmt.Errorf("sim device %d: %s: range [%v, %#x) is not inside one reservation from AddressReserve: %w",
			d.ordinal, op, p, uint64(p)+size, driver.ErrInvalidValue)
	}
	off := uint64(p) - r.base
	if off%r.gran != 0 {
		return nil, 0, 0, fmt.Errorf("sim device %d: %s: address %v is %d bytes into its reservation, not a multiple of the granularity %d: %w",
			d.ordinal, op, p, off, r.gran, driver.ErrInvalidValue)
	}
	first := int(off / r.gran)
	return r, first, first + int(size/r.gran), nil
}

// AddressFree releases a whole reservation; nothing may be mapped in it.
func (d *Device) AddressFree(p driver.Ptr, size uint64) error {
	const op = "AddressFree"
	if err := d.vmmCheck(op); err != nil {
		return err
	}
	d.mem.mu.Lock()
	r := d.mem.findLocked(uint64(p))
	if r == nil || r.kind != kindReserve || r.base != uint64(p) || r.size != size {
		d.mem.mu.Unlock()
		return fmt.Errorf("sim device %d: %s(%v, %d): not a live reservation with that start and size: %w", d.ordinal, op, p, size, driver.ErrInvalidPointer)
	}
	if r.granules.mapped > 0 {
		i, _ := r.granules.firstWhere(0, int(r.size/r.gran), true)
		d.mem.mu.Unlock()
		return fmt.Errorf("sim device %d: %s(%v, %d): granule at %#x is still mapped; MemUnmap it first: %w",
			d.ordinal, op, p, size, r.base+uint64(i)*r.gran, driver.ErrInvalidValue)
	}
	d.mem.removeLocked(r)
	d.mem.mu.Unlock()
	return unmap(r.base, r.size)
}

// MemCreate creates size bytes of physical memory (a memfd on Linux, an
// unlinked temporary file on macOS and FreeBSD), charged against the
// capacity.
func (d *Device) MemCreate(size uint64) (driver.MemHandle, error) {
	const op = "MemCreate"
	if err := d.vmmCheck(op); err != nil {
		return 0, err
	}
	if err := d.multiple(op, "size", size, false); err != nil {
		return 0, err
	}
	if err := d.fault(op, true); err != nil {
		return 0, err
	}
	if err := d.charge(op, size, size); err != nil {
		return 0, err
	}
	mem, err := newPhysMem(size)
	if err != nil {
		d.refund(size)
		return 0, fmt.Errorf("sim device %d: %s: %w", d.ordinal, op, err)
	}
	d.mu.Lock()
	d.nextHandle++
	h := &memHandle{id: d.nextHandle, size: size, mem: mem}
	d.handles[h.id] = h
	d.mu.Unlock()
	d.stats.memCreates.Add(1)
	return h.id, nil
}

// handleLocked looks up a live handle. Caller holds d.mu.
func (d *Device) handleLocked(op string, id driver.MemHandle) (*memHandle, error) {
	h, ok := d.handles[id]
	if !ok || h.released {
		return nil, fmt.Errorf("sim device %d: %s: handle %d is not a live MemCreate handle (never created, or released): %w",
			d.ordinal, op, id, driver.ErrInvalidValue)
	}
	return h, nil
}

// MemRelease releases a handle. Memory still mapped from it stays until
// unmapped, as with CUDA.
func (d *Device) MemRelease(id driver.MemHandle) error {
	const op = "MemRelease"
	if err := d.vmmCheck(op); err != nil {
		return err
	}
	d.mu.Lock()
	h, err := d.handleLocked(op, id)
	if err != nil {
		d.mu.Unlock()
		return err
	}
	h.released = true
	h.closeLocked()
	done := h.mapped == 0
	if done {
		delete(d.handles, id)
	}
	d.mu.Unlock()
	if done {
		d.refund(h.size)
	}
	return nil
}

// MemMap maps [offset, offset+size) of handle h at p, inside a
// reservation, with no access until SetAccess.
func (d *Device) MemMap(p driver.Ptr, size, offset uint64, id driver.MemHandle) error {
	const op = "MemMap"
	if err := d.vmmCheck(op); err != nil {
		return err
	}
	if err := d.multiple(op, "offset", offset, true); err != nil {
		return err
	}
	if err := d.fault(op, false); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	h, err := d.handleLocked(op, id)
	if err != nil {
		return err
	}
	if offset > h.size || size > h.size-offset {
		return fmt.Errorf("sim device %d: %s: [%d, %d) is outside handle %d of %d bytes: %w",
			d.ordinal, op, offset, offset+size, id, h.size, driver.ErrInvalidValue)
	}
	d.mem.mu.Lock()
	defer d.mem.mu.Unlock()
	r, first, last, err := d.reservationLocked(op, p, size)
	if err != nil {
		return err
	}
	if err := d.granulesMappedLocked(op, r, first, last, false); err != nil {
		return err
	}
	if err := mapFileFixed(uint64(p), size, h.mem, offset); err != nil {
		return fmt.Errorf("sim device %d: %s: %w", d.ordinal, op, err)
	}
	for i := first; i < last; i++ {
		r.granules.set(i, granule{h: h})
	}
	h.mapped += last - first
	d.stats.memMaps.Add(1)
	return nil
}

// SetAccess grants read-write access to a mapped range.
func (d *Device) SetAccess(p driver.Ptr, size uint64) error {
	const op = "SetAccess"
	if err := d.vmmCheck(op); err != nil {
		return err
	}
	if err := d.fault(op, false); err != nil {
		return err
	}
	d.mem.mu.Lock()
	defer d.mem.mu.Unlock()
	r, first, last, err := d.reservationLocked(op, p, size)
	if err != nil {
		return err
	}
	if err := d.granulesMappedLocked(op, r, first, last, true); err != nil {
		return err
	}
	if err := protectRW(uint64(p), size); err != nil {
		return fmt.Errorf("sim device %d: %s: %w", d.ordinal, op, err)
	}
	for i := first; i < last; i++ {
		r.granules.set(i, granule{h: r.granules.at(i).h, access: true})
	}
	d.stats.setAccesses.Add(1)
	return nil
}

// MemUnmap unmaps a mapped range, leaving it reserved. Work queued on it
// fails when it runs.
func (d *Device) MemUnmap(p driver.Ptr, size uint64) error {
	const op = "MemUnmap"
	if err := d.vmmCheck(op); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.mem.mu.Lock()
	defer d.mem.mu.Unlock()
	r, first, last, err := d.reservationLocked(op, p, size)
	if err != nil {
		return err
	}
	if err := d.granulesMappedLocked(op, r, first, last, true); err != nil {
		return err
	}
	old := make([]*memHandle, 0, last-first)
	for i := first; i < last; i++ {
		old = append(old, r.granules.at(i).h)
		r.granules.set(i, granule{})
	}
	d.mem.waitIdleLocked(r) // copies running on the range finish first
	if err := unmapFixed(uint64(p), size); err != nil {
		return fmt.Errorf("sim device %d: %s: %w", d.ordinal, op, err)
	}
	for _, h := range old {
		h.mapped--
		if h.released && h.mapped == 0 {
			delete(d.handles, h.id)
			d.used -= h.size
			d.stats.bytesAllocated.Add(-int64(h.size))
		}
	}
	d.stats.memUnmaps.Add(1)
	return nil
}

// CanAccessPeer reports whether d can access peer's memory: true for another
// device of the same sim driver when peer access is configured.
func (d *Device) CanAccessPeer(peer driver.Device) (bool, error) {
	if err := d.state.Check("CanAccessPeer"); err != nil {
		return false, err
	}
	pd := Hooks(peer)
	return d.cfg.Peer && pd != nil && pd.drv == d.drv && pd != d, nil
}

// EnablePeerAccess enables access to peer's memory; enabling twice is not an
// error.
func (d *Device) EnablePeerAccess(peer driver.Device) error {
	ok, err := d.CanAccessPeer(peer)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("sim device %d: EnablePeerAccess: %T is not another device of this sim driver with peer access configured: %w",
			d.ordinal, peer, driver.ErrInvalidValue)
	}
	d.mu.Lock()
	d.peersOn[peer.Ordinal()] = true
	d.mu.Unlock()
	return nil
}

// CopyPeer queues a copy of n bytes from src on srcDev to dst on d, ordered
// on s (a stream of d).
func (d *Device) CopyPeer(dst, src driver.Ptr, srcDev driver.Device, n uint64, s driver.Stream) error {
	const op = "CopyPeer"
	st, err := d.stream(s, op)
	if err != nil {
		return err
	}
	sd := Hooks(srcDev)
	if sd == nil || sd.drv != d.drv {
		return fmt.Errorf("sim device %d: %s: source device %T is not a device of this sim driver: %w", d.ordinal, op, srcDev, driver.ErrInvalidValue)
	}
	if err := sd.state.Check(op); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	if err := d.devRange(op, "destination", dst, n); err != nil {
		return err
	}
	if err := sd.devRange(op, "source", src, n); err != nil {
		return err
	}
	if err := d.fault(op, false); err != nil {
		return err
	}
	d.stats.copies.Add(1)
	return st.enqueue(op, func() error {
		return d.wrapRun(copyMem(op, d.mem, uint64(dst), sd.mem, uint64(src), n, 0))
	})
}
