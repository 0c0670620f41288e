package devalloc

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/accelkit/accelkit/driver"
)

// EnvOOMVerbose names the environment variable that, set to 1 or true,
// makes every OOMError also print the full diagnostic to stderr: the
// error's message and the MemorySummary table. New reads it (0, false or
// unset: off; any other value is an error from New). torch_musa's
// counterpart is reported to be TORCH_MUSA_OOM_VERBOSE.
const EnvOOMVerbose = "ACCELKIT_ALLOC_OOM_VERBOSE"

// OOMError reports an allocation that failed for lack of memory after the
// allocator released its cache and retried. It unwraps to
// driver.ErrOutOfMemory and to the driver's own error.
type OOMError struct {
	Device      int
	Stream      uint64
	Requested   uint64 // bytes asked for
	Rounded     uint64 // after rounding
	DeviceFree  uint64 // the driver's free and total memory at the failure
	DeviceTotal uint64
	Allocated   uint64 // bytes in live blocks
	Reserved    uint64 // bytes held from the device
	// PeakReserved is the most bytes reserved since New or ResetPeakStats.
	PeakReserved uint64
	// Segments counts the segments held (mapped ranges of expandable
	// segments count one each).
	Segments int64
	Limit    uint64 // 0 when no cap is set
	// LargestFree is the largest cached free block.
	LargestFree uint64
	// CacheHits and CacheMisses count Allocs served by the cache on the
	// first lookup and those that were not (Stats.NumCacheHits).
	CacheHits, CacheMisses int64
	// ExpandableRequested: expandable_segments was configured.
	// VMMAvailable: the device offers driver.VMM (probed by New).
	// ExpandableInUse: segments are expandable ranges.
	ExpandableRequested, VMMAvailable, ExpandableInUse bool
	// Advice says which setting to try.
	Advice string
	// Cause is what failed: the device's error, or the limit.
	Cause error
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func (e *OOMError) Error() string {
	limit := "none"
	if e.Limit != 0 {
		limit = formatBytes(e.Limit)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "devalloc: out of memory: tried to allocate %s (rounded to %s) on device %d stream %d; "+
		"device total %s, %s free; %s allocated, %s reserved (%s reserved but unallocated), peak reserved %s, %d segments; limit %s; largest free block %s; "+
		"cache hits %d, misses %d; expandable segments requested %s, device VMM %s, in use %s",
		formatBytes(e.Requested), formatBytes(e.Rounded), e.Device, e.Stream,
		formatBytes(e.DeviceTotal), formatBytes(e.DeviceFree), formatBytes(e.Allocated), formatBytes(e.Reserved),
		formatBytes(e.Reserved-min(e.Allocated, e.Reserved)), formatBytes(e.PeakReserved), e.Segments, limit, formatBytes(e.LargestFree),
		e.CacheHits, e.CacheMisses, yesNo(e.ExpandableRequested), yesNo(e.VMMAvailable), yesNo(e.ExpandableInUse))
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
	st := a.statsLocked()
	a.mu.Unlock()
	e := &OOMError{
		Device: a.dev.Ordinal(), Stream: s.ID(), Requested: size, Rounded: rsize,
		DeviceFree: free, DeviceTotal: total,
		Allocated: uint64(st.AllocatedBytes.All().Current), Reserved: uint64(st.ReservedBytes.All().Current),
		PeakReserved: uint64(st.ReservedBytes.All().Peak), Segments: st.Segment.All().Current,
		Limit: a.limit.Load(), LargestFree: a.largestFree(), CacheHits: st.NumCacheHits, CacheMisses: st.NumCacheMisses,
		ExpandableRequested: a.cfg.ExpandableSegments, VMMAvailable: a.vmmAvail, ExpandableInUse: a.vmm != nil,
		Cause: cause,
	}
	// This Alloc has not returned yet: count it as the miss it is.
	e.CacheMisses++
	e.Advice = a.advice(e)
	msg := e.Error()
	a.lastOOM.Store(&msg)
	a.rec.add(actOOM, driver.Ptr(free), size, s.ID()) // the entry's addr holds device_free, as PyTorch's
	if a.oomOut != nil {
		a.printOOM(a.oomOut, e)
	}
	if a.cfg.SnapshotOnOOM != "" {
		if err := a.WriteSnapshot(a.cfg.SnapshotOnOOM); err != nil {
			e.Advice += fmt.Sprintf(" (writing the snapshot to %s failed: %v)", a.cfg.SnapshotOnOOM, err)
		}
	}
	return e
}

// printOOM writes the full diagnostic of e to w: the message, then the
// memory summary. Write errors are dropped: this is a best-effort
// report beside the error the caller gets.
func (a *Allocator) printOOM(w io.Writer, e *OOMError) {
	var b strings.Builder
	b.WriteString(e.Error())
	b.WriteString("\n")
	b.WriteString(a.memorySummary(1))
	_, _ = io.WriteString(w, b.String())
}

// oomWriter returns where OOM diagnostics go per EnvOOMVerbose as getenv
// reads it: stderr when it is 1 or true, nil when unset, 0 or false.
func oomWriter(getenv func(string) string, stderr io.Writer) (io.Writer, error) {
	v := getenv(EnvOOMVerbose)
	if v == "" {
		return nil, nil
	}
	on, err := parseBool(EnvOOMVerbose, v)
	if err != nil {
		return nil, fmt.Errorf("devalloc: %w: %w", err, driver.ErrInvalidValue)
	}
	if !on {
		return nil, nil
	}
	return stderr, nil
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
