package devalloc

import (
	"fmt"
	"sort"
)

// Indexes of StatArray.
const (
	poolAll   = 0
	poolSmall = 1
	poolLarge = 2
)

// Stat is one PyTorch memory statistic: the current value, its peak since
// creation or ResetPeakStats, and the cumulative amounts added and removed.
type Stat struct {
	Current   int64 `json:"current"`
	Peak      int64 `json:"peak"`
	Allocated int64 `json:"allocated"`
	Freed     int64 `json:"freed"`
}

func (s *Stat) add(d int64) {
	if d >= 0 {
		s.Allocated += d
		s.Current += d
		s.Peak = max(s.Peak, s.Current)
		return
	}
	s.Freed -= d
	s.Current += d
}

// StatArray holds a statistic for all pools, the small pool and the large
// pool, as PyTorch's "all", "small_pool" and "large_pool".
type StatArray [3]Stat

// All, Small and Large name the entries of a StatArray.
func (a StatArray) All() Stat   { return a[poolAll] }
func (a StatArray) Small() Stat { return a[poolSmall] }
func (a StatArray) Large() Stat { return a[poolLarge] }

const (
	stAllocation = iota
	stSegment
	stActive
	stInactiveSplit
	stAllocatedBytes
	stReservedBytes
	stActiveBytes
	stInactiveSplitBytes
	stRequestedBytes
	numStatArrays
)

var statArrayNames = [numStatArrays]string{
	"allocation", "segment", "active", "inactive_split", "allocated_bytes",
	"reserved_bytes", "active_bytes", "inactive_split_bytes", "requested_bytes",
}

// counters is the allocator's statistics; guarded by Allocator.mu.
//
// For the stat arrays only the small and large pools are counted; of the
// "all" entry only the peak is kept, and the rest is their sum (array).
// The hit path updates five to seven of them per operation, straight-line
// rather than through a delta loop: committed for an allocation's five
// (peaks checked only when the slack does not cover it), inc and dec for
// the rest.
type counters struct {
	arr                 [numStatArrays]StatArray
	oversizeAllocations Stat
	oversizeSegments    Stat
	numAllocRetries     int64
	numOOMs             int64
	numSyncAllStreams   int64
	numDeviceAlloc      int64
	numDeviceFree       int64
	numCrossStreamReuse int64
	numGCReleases       int64
	numGrowReleases     int64
	numAllocs           int64
	largestAlloc        uint64
	// slack is, by pool index (poolAll for the "all" entries), a lower
	// bound on how far each entry of the arrays a hit moves up
	// (allocation and active in n; allocated, active and requested bytes
	// in bytes) stands below its peak. While a hit's increments fit under
	// it no peak can move, so committed skips the peak checks and only
	// shrinks it; decrements leave it alone (it stays a bound). When an
	// increment does not fit, or inc moved one of those arrays, the peaks
	// are checked one by one and the slack recomputed (resetSlack).
	slack [3]slack
}

type slack struct{ n, bytes int64 }

// hotStat reports whether stat k is one that committed counts.
func hotStat(k int) bool {
	switch k {
	case stAllocation, stActive, stAllocatedBytes, stActiveBytes, stRequestedBytes:
		return true
	}
	return false
}

// committed counts an allocation of bytes bytes (size requested, at most
// bytes) in pool: allocation, allocated, requested and active, with their
// peaks.
func (c *counters) committed(pool int, bytes, size int64) {
	sp, sa := &c.slack[pool], &c.slack[poolAll]
	if sp.n < 1 || sa.n < 1 || sp.bytes < bytes || sa.bytes < bytes {
		c.committedPeaks(pool, bytes, size)
		return
	}
	sp.n--
	sa.n--
	sp.bytes -= bytes
	sa.bytes -= bytes
	bump(&c.arr[stAllocation][pool], 1)
	bump(&c.arr[stAllocatedBytes][pool], bytes)
	bump(&c.arr[stRequestedBytes][pool], size)
	bump(&c.arr[stActive][pool], 1)
	bump(&c.arr[stActiveBytes][pool], bytes)
}

// bump adds v to s below its peak.
func bump(s *Stat, v int64) {
	s.Allocated += v
	s.Current += v
}

// committedPeaks is committed when the slack may not cover it.
func (c *counters) committedPeaks(pool int, bytes, size int64) {
	c.inc(stAllocation, pool, 1)
	c.inc(stAllocatedBytes, pool, bytes)
	c.inc(stRequestedBytes, pool, size)
	c.inc(stActive, pool, 1)
	c.inc(stActiveBytes, pool, bytes)
	c.resetSlack()
}

// resetSlack sets the slack to the exact distances from the peaks.
func (c *counters) resetSlack() {
	for _, p := range [3]int{poolAll, poolSmall, poolLarge} {
		gap := func(k int) int64 {
			a := &c.arr[k]
			if p == poolAll {
				return a[poolAll].Peak - a[poolSmall].Current - a[poolLarge].Current
			}
			return a[p].Peak - a[p].Current
		}
		c.slack[p] = slack{
			n:     min(gap(stAllocation), gap(stActive)),
			bytes: min(gap(stAllocatedBytes), gap(stActiveBytes), gap(stRequestedBytes)),
		}
	}
}

// delta is the statistics change of one operation, applied in the same
// critical section as the block changes it counts.
type delta struct {
	pool          int
	d             [numStatArrays]int64
	oversizeAlloc int64
	oversizeSeg   int64
	deviceAllocs  int64
	deviceFrees   int64
	allocs        int64
	largest       uint64
}

func (d *delta) add(k int, v int64) { d.d[k] += v }

// inc adds v >= 0 to stat k of pool (poolSmall or poolLarge). For an
// array committed counts (hotStat), the caller zeroes the slack after.
func (c *counters) inc(k, pool int, v int64) {
	a := &c.arr[k]
	s := &a[pool]
	s.Allocated += v
	cur := s.Current + v
	s.Current = cur
	if cur > s.Peak {
		s.Peak = cur
	}
	// pool is poolSmall or poolLarge; 3-pool is the other one.
	if all := cur + a[3-pool].Current; all > a[poolAll].Peak {
		a[poolAll].Peak = all
	}
}

// dec subtracts v >= 0 from stat k of pool; peaks cannot change, and
// Freed is not kept: it is always Allocated - Current (array).
func (c *counters) dec(k, pool int, v int64) {
	c.arr[k][pool].Current -= v
}

// array returns stat k with its "all" entry and Freed filled in.
func (c *counters) array(k int) StatArray {
	a := c.arr[k]
	for _, p := range [2]int{poolSmall, poolLarge} {
		a[p].Freed = a[p].Allocated - a[p].Current
	}
	s, l := a[poolSmall], a[poolLarge]
	a[poolAll] = Stat{Current: s.Current + l.Current, Peak: a[poolAll].Peak,
		Allocated: s.Allocated + l.Allocated, Freed: s.Freed + l.Freed}
	return a
}

// applyLocked adds d to the counters. a.mu held.
func (a *Allocator) applyLocked(d *delta) { a.st.apply(d) }

// apply adds d to the counters.
func (c *counters) apply(d *delta) {
	for k, v := range d.d {
		switch {
		case v > 0:
			c.inc(k, d.pool, v)
			if hotStat(k) {
				c.slack = [3]slack{} // the next committed recomputes it
			}
		case v < 0:
			c.dec(k, d.pool, -v)
		}
	}
	c.oversizeAllocations.add(d.oversizeAlloc)
	c.oversizeSegments.add(d.oversizeSeg)
	c.numDeviceAlloc += d.deviceAllocs
	c.numDeviceFree += d.deviceFrees
	c.numAllocs += d.allocs
	c.largestAlloc = max(c.largestAlloc, d.largest)
}

func (a *Allocator) count(fn func(c *counters)) {
	a.mu.Lock()
	fn(&a.st)
	a.mu.Unlock()
}

// Stats is a copy of the allocator's statistics, named as in PyTorch's
// torch.cuda.memory_stats().
type Stats struct {
	Allocation         StatArray `json:"allocation"`
	Segment            StatArray `json:"segment"`
	Active             StatArray `json:"active"`
	InactiveSplit      StatArray `json:"inactive_split"`
	AllocatedBytes     StatArray `json:"allocated_bytes"`
	ReservedBytes      StatArray `json:"reserved_bytes"`
	ActiveBytes        StatArray `json:"active_bytes"`
	InactiveSplitBytes StatArray `json:"inactive_split_bytes"`
	RequestedBytes     StatArray `json:"requested_bytes"`

	OversizeAllocations Stat `json:"oversize_allocations"`
	OversizeSegments    Stat `json:"oversize_segments"`

	NumAllocRetries     int64 `json:"num_alloc_retries"`
	NumOOMs             int64 `json:"num_ooms"`
	NumSyncAllStreams   int64 `json:"num_sync_all_streams"`
	NumDeviceAlloc      int64 `json:"num_device_alloc"`
	NumDeviceFree       int64 `json:"num_device_free"`
	NumCrossStreamReuse int64 `json:"num_cross_stream_reuse"`
	// NumGCReleases counts garbage collections that released memory.
	NumGCReleases int64 `json:"num_gc_releases"`
	// NumGrowReleases counts cached segments released before growing
	// (release_before_grow); PyTorch has no such stat.
	NumGrowReleases int64 `json:"num_grow_releases"`

	// NumAllocs counts successful Alloc calls since creation.
	NumAllocs int64 `json:"num_allocs"`
	// LargestAlloc is the largest block handed out, in bytes.
	LargestAlloc uint64 `json:"largest_alloc"`

	// NumCacheHits counts Allocs served from the cache on the first
	// lookup in their stream's pool; NumCacheMisses those that were not
	// (they took another stream's block, grew the pool, or failed). Both
	// are counted when the Alloc returns; PyTorch has no such statistic.
	// The hit path counts nothing: hits are successful Allocs less the
	// misses that succeeded.
	NumCacheHits   int64 `json:"num_cache_hits"`
	NumCacheMisses int64 `json:"num_cache_misses"`

	// Backend is "native" or "passthrough".
	Backend string `json:"backend"`
	// ExpandableSegments reports whether expandable segments are in use;
	// ExpandableFallback that they were asked for but the device has no
	// driver.VMM, so plain segments are used.
	ExpandableSegments bool `json:"expandable_segments"`
	ExpandableFallback bool `json:"expandable_fallback"`
	// PendingFrees counts frees waiting for noted streams.
	PendingFrees int `json:"pending_frees"`
	// Limit is the reserved-bytes cap, 0 if none.
	Limit uint64 `json:"limit"`
}

func (a *Allocator) statsLocked() Stats {
	s := a.st.stats()
	s.Backend = a.cfg.Backend.String()
	s.ExpandableSegments, s.ExpandableFallback = a.vmm != nil, a.expFallback
	s.Limit = a.limit.Load()
	s.NumCacheHits, s.NumCacheMisses = a.cacheHitsMissesLocked(s.NumAllocs)
	return s
}

// cacheHitsMissesLocked derives the cache hits and misses from the
// successful Allocs (numAllocs) and the miss counters. A miss that has
// committed its block but not yet returned counts as a hit until it
// returns; hits never go below 0. a.mu held.
func (a *Allocator) cacheHitsMissesLocked(numAllocs int64) (hits, misses int64) {
	ok, failed := int64(a.missOK.Load()), int64(a.missFailed.Load())
	return max(0, numAllocs-ok), ok + failed
}

// stats returns the counters as Stats; the fields that are not counters
// are the caller's to fill in.
func (c *counters) stats() Stats {
	return Stats{
		Allocation: c.array(stAllocation), Segment: c.array(stSegment), Active: c.array(stActive),
		InactiveSplit: c.array(stInactiveSplit), AllocatedBytes: c.array(stAllocatedBytes),
		ReservedBytes: c.array(stReservedBytes), ActiveBytes: c.array(stActiveBytes),
		InactiveSplitBytes: c.array(stInactiveSplitBytes), RequestedBytes: c.array(stRequestedBytes),
		OversizeAllocations: c.oversizeAllocations, OversizeSegments: c.oversizeSegments,
		NumAllocRetries: c.numAllocRetries, NumOOMs: c.numOOMs, NumSyncAllStreams: c.numSyncAllStreams,
		NumDeviceAlloc: c.numDeviceAlloc, NumDeviceFree: c.numDeviceFree,
		NumCrossStreamReuse: c.numCrossStreamReuse, NumGCReleases: c.numGCReleases,
		NumGrowReleases: c.numGrowReleases,
		NumAllocs:       c.numAllocs, LargestAlloc: c.largestAlloc,
	}
}

// Stats returns a consistent copy of the statistics.
func (a *Allocator) Stats() Stats {
	a.mu.Lock()
	s := a.statsLocked()
	a.mu.Unlock()
	s.PendingFrees = a.def.Pending()
	return s
}

// ResetPeakStats sets every peak to its current value, like
// torch.cuda.reset_peak_memory_stats.
func (a *Allocator) ResetPeakStats() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k := range a.st.arr {
		for p := range a.st.arr[k] {
			a.st.arr[k][p].Peak = a.st.arr[k][p].Current
		}
		a.st.arr[k][poolAll].Peak = a.st.array(k).All().Current
	}
	a.st.oversizeAllocations.Peak = a.st.oversizeAllocations.Current
	a.st.oversizeSegments.Peak = a.st.oversizeSegments.Current
	a.st.slack = [3]slack{}
}

// Map flattens s with PyTorch's key names, such as
// "allocated_bytes.all.current", "segment.large_pool.peak",
// "num_alloc_retries" and "oversize_allocations.current".
func (s Stats) Map() map[string]int64 {
	m := map[string]int64{}
	arrs := [numStatArrays]StatArray{s.Allocation, s.Segment, s.Active, s.InactiveSplit,
		s.AllocatedBytes, s.ReservedBytes, s.ActiveBytes, s.InactiveSplitBytes, s.RequestedBytes}
	pools := [3]string{"all", "small_pool", "large_pool"}
	put := func(prefix string, st Stat) {
		m[prefix+".current"] = st.Current
		m[prefix+".peak"] = st.Peak
		m[prefix+".allocated"] = st.Allocated
		m[prefix+".freed"] = st.Freed
	}
	for k, arr := range arrs {
		for p, st := range arr {
			put(statArrayNames[k]+"."+pools[p], st)
		}
	}
	put("oversize_allocations", s.OversizeAllocations)
	put("oversize_segments", s.OversizeSegments)
	m["num_alloc_retries"] = s.NumAllocRetries
	m["num_ooms"] = s.NumOOMs
	m["num_sync_all_streams"] = s.NumSyncAllStreams
	m["num_device_alloc"] = s.NumDeviceAlloc
	m["num_device_free"] = s.NumDeviceFree
	m["num_cross_stream_reuse"] = s.NumCrossStreamReuse
	m["num_gc_releases"] = s.NumGCReleases
	m["num_grow_releases"] = s.NumGrowReleases
	m["num_cache_hits"] = s.NumCacheHits
	m["num_cache_misses"] = s.NumCacheMisses
	return m
}

// MapKeys returns Map's keys sorted.
func (s Stats) MapKeys() []string {
	m := s.Map()
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// TFStats mirrors TensorFlow's SP_AllocatorStats (the StreamExecutor C API
// struct a pluggable device fills in), for plugin authors.
type TFStats struct {
	NumAllocs             int64 `json:"num_allocs"`
	BytesInUse            int64 `json:"bytes_in_use"`
	PeakBytesInUse        int64 `json:"peak_bytes_in_use"`
	LargestAllocSize      int64 `json:"largest_alloc_size"`
	HasBytesLimit         bool  `json:"has_bytes_limit"`
	BytesLimit            int64 `json:"bytes_limit"`
	BytesReserved         int64 `json:"bytes_reserved"`
	PeakBytesReserved     int64 `json:"peak_bytes_reserved"`
	HasBytesReservableLim bool  `json:"has_bytes_reservable_limit"`
	BytesReservableLimit  int64 `json:"bytes_reservable_limit"`
	LargestFreeBlockBytes int64 `json:"largest_free_block_bytes"`
}

// TFStats returns the statistics in SP_AllocatorStats shape. The byte limit
// is the allocator's cap, else the device total.
func (a *Allocator) TFStats() TFStats {
	s := a.Stats()
	limit := s.Limit
	if limit == 0 {
		limit = a.total
	}
	return TFStats{
		NumAllocs:             s.NumAllocs,
		BytesInUse:            s.AllocatedBytes.All().Current,
		PeakBytesInUse:        s.AllocatedBytes.All().Peak,
		LargestAllocSize:      int64(s.LargestAlloc),
		HasBytesLimit:         true,
		BytesLimit:            int64(limit),
		BytesReserved:         s.ReservedBytes.All().Current,
		PeakBytesReserved:     s.ReservedBytes.All().Peak,
		HasBytesReservableLim: true,
		BytesReservableLimit:  int64(limit),
		LargestFreeBlockBytes: int64(a.largestFree()),
	}
}

// largestFree is the largest cached free block over every set.
func (a *Allocator) largestFree() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return max(a.largestFreeLocked(true), a.largestFreeLocked(false))
}

// formatBytes prints n in the units PyTorch's OOM message uses.
func formatBytes(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.2f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
