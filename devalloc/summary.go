package devalloc

// The memory summary: torch.cuda.memory_summary's table, for people
// reading a log (and the OOM diagnostic EnvOOMVerbose prints).

import (
	"fmt"
	"strings"
)

// summaryWidth is the width of the table's rule lines, as PyTorch's.
const summaryWidth = 75

// MemorySummary returns a human-readable table of the statistics, laid out
// like torch.cuda.memory_summary(): current, peak, total allocated and
// total freed for each of PyTorch's metrics, for all pools and per pool;
// then what PyTorch's table lacks: the driver's free and total memory,
// the largest cached free block, cache hits and misses, the limit, and
// whether expandable segments were requested, the device offers VMM and
// they are in use. Taken from one Stats and one MemInfo call, so the rows
// agree with each other.
func (a *Allocator) MemorySummary() string { return a.memorySummary(0) }

// memorySummary is MemorySummary counting inflight more cache misses: the
// OOM diagnostic counts the failing Alloc, which has not returned yet.
func (a *Allocator) memorySummary(inflight int64) string {
	free, total, err := a.dev.MemInfo()
	s := a.Stats()
	s.NumCacheMisses += inflight
	largest := a.largestFree()
	var b strings.Builder
	rule := func(c byte) { fmt.Fprintf(&b, "|%s|\n", strings.Repeat(string(c), summaryWidth)) }
	row := func(text string) { fmt.Fprintf(&b, "|%-*s|\n", summaryWidth, text) }
	rule('=')
	title := fmt.Sprintf("devalloc memory summary, device %d", a.dev.Ordinal())
	pad := (summaryWidth - len(title)) / 2
	row(strings.Repeat(" ", pad) + title)
	rule('-')
	row(fmt.Sprintf(" %-28s %s", fmt.Sprintf("OOMs: %d", s.NumOOMs), fmt.Sprintf("alloc retries: %d", s.NumAllocRetries)))
	rule('=')
	row(fmt.Sprintf(" %-21s | %10s | %10s | %10s | %10s ", "Metric", "Cur Usage", "Peak Usage", "Tot Alloc", "Tot Freed"))
	stat := func(name string, arr StatArray, bytes bool) {
		for p, label := range [3]string{name, "      from large pool", "      from small pool"} {
			st := arr[[3]int{poolAll, poolLarge, poolSmall}[p]]
			f := func(v int64) string {
				if bytes {
					return summaryBytes(v)
				}
				return fmt.Sprint(v)
			}
			row(fmt.Sprintf(" %-21s | %10s | %10s | %10s | %10s ", label, f(st.Current), f(st.Peak), f(st.Allocated), f(st.Freed)))
		}
		rule('-')
	}
	rule('-')
	stat("Allocated memory", s.AllocatedBytes, true)
	stat("Active memory", s.ActiveBytes, true)
	stat("Requested memory", s.RequestedBytes, true)
	stat("Reserved memory", s.ReservedBytes, true)
	stat("Non-releasable memory", s.InactiveSplitBytes, true)
	stat("Allocations", s.Allocation, false)
	stat("Active allocs", s.Active, false)
	stat("Reserved segments", s.Segment, false)
	stat("Non-releasable allocs", s.InactiveSplit, false)
	for _, o := range []struct {
		name string
		st   Stat
	}{{"Oversize allocations", s.OversizeAllocations}, {"Oversize segments", s.OversizeSegments}} {
		row(fmt.Sprintf(" %-21s | %10d | %10d | %10d | %10d ", o.name, o.st.Current, o.st.Peak, o.st.Allocated, o.st.Freed))
	}
	rule('=')
	if err != nil {
		row(fmt.Sprintf(" device memory: unknown (%v)", err))
	} else {
		row(fmt.Sprintf(" device memory: %s total, %s free", formatBytes(total), formatBytes(free)))
	}
	limit := "none"
	if s.Limit != 0 {
		limit = formatBytes(s.Limit)
	}
	row(fmt.Sprintf(" segments: %d; largest free block: %s; limit: %s", s.Segment.All().Current, formatBytes(largest), limit))
	row(fmt.Sprintf(" cache hits: %d; misses: %d; device allocs: %d; frees: %d",
		s.NumCacheHits, s.NumCacheMisses, s.NumDeviceAlloc, s.NumDeviceFree))
	row(fmt.Sprintf(" expandable segments requested: %s; device VMM: %s; in use: %s",
		yesNo(a.cfg.ExpandableSegments), yesNo(a.vmmAvail), yesNo(s.ExpandableSegments)))
	rule('=')
	return b.String()
}

// summaryBytes prints n as PyTorch's summary does: whole units, B to PiB,
// switching unit once the value passes 2048 of the smaller one.
func summaryBytes(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	v, u := n, 0
	for u < len(units)-1 && (v >= 2048 || v <= -2048) {
		v /= 1024
		u++
	}
	return fmt.Sprintf("%d %s", v, units[u])
}
