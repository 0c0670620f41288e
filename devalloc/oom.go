package devalloc

import (
	"errors"
	"fmt"
	"strings"

	"github.com/accelkit/accelkit/driver"
)

// OOMError reports an allocation that failed for lack of memory after the
// allocator released its cache and retried. It unwraps to
// driver.ErrOutOfMemory and to the driver's own error.
type OOMError struct {
	Device      int
	Stream      uint64
	Requested   uint64 // bytes asked for
	Rounded     uint64 // after rounding
	DeviceFree  uint64
	DeviceTotal uint64
	Allocated   uint64 // bytes in live blocks
	Reserved    uint64 // bytes held from the device
	Limit       uint64 // 0 when no cap is set
	LargestFree uint64 // largest cached free block
	// Advice says which setting to try.
	Advice string
	// Cause is what failed: the device's error, or the limit.
	Cause error
}

func (e *OOMError) Error() string {
	limit := "none"
	if e.Limit != 0 {
		limit = formatBytes(e.Limit)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "devalloc: out of memory: tried to allocate %s (rounded to %s) on device %d stream %d; "+
		"device total %s, %s free; %s allocated, %s reserved (%s reserved but unallocated); limit %s; largest free block %s",
		formatBytes(e.Requested), formatBytes(e.Rounded), e.Device, e.Stream,
		formatBytes(e.DeviceTotal), formatBytes(e.DeviceFree), formatBytes(e.Allocated), formatBytes(e.Reserved),
		formatBytes(e.Reserved-min(e.Allocated, e.Reserved)), limit, formatBytes(e.LargestFree))
	if e.Cause != nil {
		fmt.Fprintf(&b, " (cause: %v)", e.Cause)
	}
	if e.Advice != "" {
		b.WriteString(". ")
		b.WriteString(e.Advice)
	}
	return b.String()
}

// Unwrap returns driver.ErrOutOfMemory and the cause.
func (e *OOMError) Unwrap() []error {
	if e.Cause == nil {
		return []error{driver.ErrOutOfMemory}
	}
	return []error{driver.ErrOutOfMemory, e.Cause}
}

// oom counts and builds the OOMError for a request that failed.
func (a *Allocator) oom(size, rsize uint64, s driver.Stream, cause error) error {
	free, total, _ := a.dev.MemInfo()
	a.mu.Lock()
	a.st.numOOMs++
	allocated := uint64(a.st.array(stAllocatedBytes).All().Current)
	reserved := uint64(a.st.array(stReservedBytes).All().Current)
	a.mu.Unlock()
	e := &OOMError{
		Device: a.dev.Ordinal(), Stream: s.ID(), Requested: size, Rounded: rsize,
		DeviceFree: free, DeviceTotal: total, Allocated: allocated, Reserved: reserved,
		Limit: a.limit.Load(), LargestFree: a.largestFree(), Cause: cause,
	}
	e.Advice = a.advice(e)
	msg := e.Error()
	a.lastOOM.Store(&msg)
	if a.hist != nil {
		a.hist.add(actOOM, 0, size, s.ID())
	}
	if a.cfg.SnapshotOnOOM != "" {
		if err := a.WriteSnapshot(a.cfg.SnapshotOnOOM); err != nil {
			e.Advice += fmt.Sprintf(" (writing the snapshot to %s failed: %v)", a.cfg.SnapshotOnOOM, err)
		}
	}
	return e
}

// advice picks the setting to try from where the memory is.
func (a *Allocator) advice(e *OOMError) string {
	unalloc := e.Reserved - min(e.Allocated, e.Reserved)
	var tips []string
	if unalloc >= e.Rounded || unalloc > e.Reserved/4 {
		// Enough memory is reserved but split among blocks that do not fit:
		// fragmentation.
		// With expandable segments the retry has unmapped every free whole
		// page: what stays reserved shares pages with live blocks, which
		// no setting changes.
		switch {
		case a.vmm == nil && !a.expFallback:
			tips = append(tips, "reserved but unallocated memory is large, so memory is fragmented: try expandable_segments:true in "+EnvConfig)
		case a.expFallback:
			tips = append(tips, "reserved but unallocated memory is large (fragmentation), and expandable segments are off because the device has no VMM support")
		}
		if a.maxSplit == 0 && a.vmm == nil {
			tip := "max_split_size_mb (for example max_split_size_mb:128) so that large cached blocks are not split"
			if len(tips) > 0 {
				tip = "or " + tip
			} else {
				tip = "try " + tip
			}
			tips = append(tips, tip)
		}
	}
	if e.Limit != 0 && e.Reserved+e.Rounded > e.Limit {
		tips = append(tips, "the allocator limit is reached: raise SetLimit/SetMemoryFraction")
	}
	if len(tips) == 0 {
		tips = append(tips, "live allocations use the memory: free some, or use smaller requests")
	}
	return strings.Join(tips, "; ")
}

// IsOOM reports whether err is an allocation failure for lack of memory.
func IsOOM(err error) bool {
	var oe *OOMError
	return errors.As(err, &oe) || errors.Is(err, driver.ErrOutOfMemory)
}
