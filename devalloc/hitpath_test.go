package devalloc

import (
	"math/rand/v2"
	"testing"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/drivertest"
)

// TestHitPathMatchesGeneralPath drives allocations, frees and
// RecordStream with sizes that repeat, so that most allocations are
// exact-size hits (hitLocked) and the rest take the general path
// (takeLocked) or grow, and checks every operation against what does not
// depend on which path ran: a hit hands out the block best fit chose
// before the call (fit and the oversize rules), and the counters a hit
// moves (allocation, active, inactive_split, their bytes, requested
// bytes: current, peak, and for the first five the cumulative count) are
// what a scan of the blocks and a count of the operations say.
func TestHitPathMatchesGeneralPath(t *testing.T) {
	for _, conf := range []string{"", "max_split_size_mb:24", "expandable_segments:true"} {
		t.Run("conf="+conf, func(t *testing.T) {
			dev, _ := drivertest.OpenDevice(t, "sim", "capacity=256MiB")
			cfg, err := ParseConfig(conf)
			if err != nil {
				t.Fatal(err)
			}
			a, err := New(dev, cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if !t.Failed() { // a failure may have left state Close cannot walk
					a.Close()
				}
			})
			ss := append([]driver.Stream{dev.DefaultStream()}, streams(t, dev, 2)...)
			sizes := []uint64{512, 1000, 4096, 70_000, 1 << 20, 3 << 20, 5 << 20, 12 << 20, 26 << 20}
			r := rand.New(rand.NewPCG(7, 8))
			type live struct {
				p      driver.Ptr
				stream int
			}
			var held []live
			var m statModel
			hits := 0
			for op := range 3000 {
				switch k := r.IntN(10); {
				case k < 5 || len(held) == 0:
					size, si := sizes[r.IntN(len(sizes))], r.IntN(len(ss))
					switch r.IntN(4) {
					case 0:
						size += r.Uint64N(4096) // not always a size seen before
					case 1:
						// Few small sizes: classes of several blocks, split
						// and merged, so that heap roots go stale.
						size = 512 * (1 + r.Uint64N(8))
					}
					want := a.bestFitNow(size, ss[si])
					misses := a.missOK.Load() + a.missFailed.Load()
					p, err := a.Alloc(size, ss[si])
					if err != nil {
						if !IsOOM(err) {
							t.Fatal(err)
						}
						break
					}
					if a.missOK.Load()+a.missFailed.Load() == misses {
						hits++
						if p != want {
							t.Fatalf("op %d: a hit of Alloc(%d) on stream %d took %v; best fit before it was %v", op, size, si, p, want)
						}
					}
					m.allocated(a, p, size)
					held = append(held, live{p, si})
				case k < 6:
					x := held[r.IntN(len(held))]
					if err := a.RecordStream(x.p, ss[(x.stream+1)%len(ss)]); err != nil {
						t.Fatal(err)
					}
				default:
					j := r.IntN(len(held))
					mustFree(t, a, held[j].p)
					if err := a.Drain(); err != nil {
						t.Fatal(err)
					}
					held = append(held[:j], held[j+1:]...)
				}
				m.check(t, a, op)
				if op%50 == 0 {
					checkIndexes(t, a)
				}
			}
			t.Logf("%d cache hits", hits)
			if hits < 500 {
				t.Errorf("only %d cache hits: the sequence does not exercise the hit path", hits)
			}
			checkIndexes(t, a)
		})
	}
}

// bestFitNow returns the address of the block Alloc(size, s) would take
// from s's own set by best fit under the oversize rules, or 0. It scans
// the set's segments and changes nothing (blockSet.fit would drop stale
// heap entries, which the hit path must get past on its own).
func (a *Allocator) bestFitNow(size uint64, s driver.Stream) driver.Ptr {
	rsize := a.roundSize(size)
	a.mu.Lock()
	defer a.mu.Unlock()
	fs := a.lookupLocked(s.ID(), rsize <= kSmallSize)
	if fs == nil {
		return 0
	}
	var best *block
	for seg := range fs.segs {
		for b := seg.head; b != nil; b = b.next {
			if b.state == stateFree && b.size >= rsize && (best == nil || blockLess(b, best)) {
				best = b
			}
		}
	}
	if best != nil && a.fits(best, rsize) {
		return best.ptr
	}
	return 0
}

// statModel is what the hit's counters must say, from the operations (the
// cumulative counts) and from the blocks (current values, and peaks as the
// largest value seen after any operation: within one operation these
// counters only move one way before they settle).
type statModel struct {
	alloc [numStatArrays][3]int64 // cumulative counts, by pool
	peak  [numStatArrays][3]int64
}

// hitStats are the counters a hit pair moves.
var hitStats = []int{stAllocation, stActive, stAllocatedBytes, stActiveBytes, stRequestedBytes, stInactiveSplit, stInactiveSplitBytes}

// allocated counts the allocation at p, of size bytes asked for.
func (m *statModel) allocated(a *Allocator, p driver.Ptr, size uint64) {
	a.mu.Lock()
	b := a.ptrs.get(p)
	pool := poolIdx(b.set.small)
	a.mu.Unlock()
	m.alloc[stAllocation][pool]++
	m.alloc[stActive][pool]++
	m.alloc[stAllocatedBytes][pool] += int64(b.size)
	m.alloc[stActiveBytes][pool] += int64(b.size)
	m.alloc[stRequestedBytes][pool] += int64(size)
}

// check compares the counters with a scan of every block.
func (m *statModel) check(t *testing.T, a *Allocator, op int) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	var cur [numStatArrays][3]int64
	for fs := a.setHead; fs != nil; fs = fs.nextSet {
		pool := poolIdx(fs.small)
		for seg := range fs.segs {
			for b := seg.head; b != nil; b = b.next {
				n, bytes := int64(1), int64(b.size)
				switch {
				case b.state == stateAllocated:
					cur[stAllocation][pool] += n
					cur[stAllocatedBytes][pool] += bytes
					cur[stRequestedBytes][pool] += int64(b.requested)
					fallthrough
				case b.state == statePendingFree:
					cur[stActive][pool] += n
					cur[stActiveBytes][pool] += bytes
				case inactiveSplit(b):
					cur[stInactiveSplit][pool] += n
					cur[stInactiveSplitBytes][pool] += bytes
				}
			}
		}
	}
	for _, k := range hitStats {
		cur[k][poolAll] = cur[k][poolSmall] + cur[k][poolLarge]
		got := a.st.array(k)
		for p := range 3 {
			m.peak[k][p] = max(m.peak[k][p], cur[k][p])
			if got[p].Current != cur[k][p] || got[p].Peak != m.peak[k][p] {
				t.Fatalf("op %d: %s[%d]: current %d, peak %d; the blocks say %d, peak %d", op, statArrayNames[k], p, got[p].Current, got[p].Peak, cur[k][p], m.peak[k][p])
			}
			if k == stInactiveSplit || k == stInactiveSplitBytes {
				continue // splits and merges move these: not counted here
			}
			want := m.alloc[k][p]
			if p == poolAll {
				want = m.alloc[k][poolSmall] + m.alloc[k][poolLarge]
			}
			if got[p].Allocated != want {
				t.Fatalf("op %d: %s[%d]: allocated %d, the operations say %d", op, statArrayNames[k], p, got[p].Allocated, want)
			}
		}
	}
}
