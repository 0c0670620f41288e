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
	if tip := tooLarge(e); tip != "" {
		return tip
	}
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
	// The limit is tested against the segment a miss reserves, which may
	// be larger than the request (a 9 MiB request takes a 20 MiB segment):
	// the cause says whether it refused, the sizes here cannot.
	if errors.Is(e.Cause, errLimit) {
		tips = append(tips, fmt.Sprintf("the allocator limit (%s) refused the new segment this request needs, with %s already reserved: raise it (SetLimit, SetMemoryFraction or %s in %s) or free some allocations",
			formatBytes(e.Limit), formatBytes(e.Reserved), "per_process_memory_fraction", EnvConfig))
	}
	if len(tips) == 0 {
		tips = append(tips, whereUsed(e, "free some, or use smaller requests"))
	}
	return strings.Join(tips, "; ")
}

// tooLarge is the advice for a request that could never fit, whatever is
// freed: larger than the device's total memory or than the allocator's
// limit. "" when neither.
func tooLarge(e *OOMError) string {
	asked := formatBytes(e.Requested)
	if e.Rounded != e.Requested {
		asked += " (rounded to " + formatBytes(e.Rounded) + ")"
	}
	switch {
	case e.DeviceTotal != 0 && e.Rounded > e.DeviceTotal:
		return fmt.Sprintf("the request of %s exceeds the device's total memory of %s, so no setting or free makes it fit: split it into requests smaller than the device, or use a device with more memory",
			asked, formatBytes(e.DeviceTotal))
	case e.Limit != 0 && e.Rounded > e.Limit:
		return fmt.Sprintf("the request of %s exceeds the allocator limit of %s by itself: raise the limit above it (SetLimit, SetMemoryFraction or %s in %s), or split the request",
			asked, formatBytes(e.Limit), "per_process_memory_fraction", EnvConfig)
	}
	return ""
}

// whereUsed says who holds the device's memory when no setting helps:
// this resource's live allocations, or users outside it (another
// allocator, process or context), which freeing ours would not cure.
// free is the advice for the resource's own live allocations.
func whereUsed(e *OOMError, free string) string {
	var outside uint64
	if used := e.DeviceTotal - min(e.DeviceFree, e.DeviceTotal); used > e.Reserved {
		outside = used - e.Reserved
	}
	var tips []string
	if e.Allocated > 0 {
		tips = append(tips, fmt.Sprintf("live allocations use the memory (%s of the device's %s): %s", formatBytes(e.Allocated), formatBytes(e.DeviceTotal), free))
	}
	// Name the outside use when the request would fit beside this
	// resource's live allocations without it.
	if outside > 0 && (e.Allocated == 0 || e.Allocated+e.Rounded <= e.DeviceTotal) {
		tips = append(tips, fmt.Sprintf("%s of the device's %s is used outside this allocator (another allocator, process or context): free it there, or share one allocator",
			formatBytes(outside), formatBytes(e.DeviceTotal)))
	}
	if len(tips) == 0 {
		return fmt.Sprintf("the device has %s free of %s: use smaller requests", formatBytes(e.DeviceFree), formatBytes(e.DeviceTotal))
	}
	return strings.Join(tips, "; ")
}

// IsOOM reports whether err is an allocation failure for lack of memory.
func IsOOM(err error) bool {
	var oe *OOMError
	return errors.As(err, &oe) || errors.Is(err, driver.ErrOutOfMemory)
}
