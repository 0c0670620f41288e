package hostpin

import (
	"cmp"
	"slices"
	"testing"

	"github.com/accelkit/accelkit/driver/drivertest"
)

// FuzzAllocFree drives an allocator with a sequence of operations decoded
// from the input (alloc, free, record on a gated stream, open the gate,
// empty the cache, poll) and checks after each one against a model of the
// live buffers: no two live buffers overlap, each keeps what its owner
// wrote, handed-out sizes stay within 1.25x (or the 4 KiB minimum), and the
// byte counters match the model. At the end every driver allocation has
// been returned.
func FuzzAllocFree(f *testing.F) {
	f.Add([]byte{0, 1, 2, 0, 3, 4, 1, 0, 5, 2, 0, 6, 7})
	f.Add([]byte{0, 200, 10, 0, 200, 11, 2, 0, 1, 0, 4, 0, 0, 200, 10, 3, 5})
	f.Add([]byte{0, 0, 1, 0, 0, 2, 0, 0, 3, 1, 1, 1, 0, 4, 0, 0, 2})
	f.Add([]byte{0, 255, 255, 2, 0, 1, 0, 0, 255, 250, 3, 0, 255, 255})
	dev, sd := drivertest.OpenDevice(f, "sim", "")
	st := newStream(f, dev)
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 600 {
			ops = ops[:600]
		}
		base := sd.Stats()
		a, err := New(dev, Options{CacheCap: 1 << 20, PageOnlyThreshold: 256 << 10})
		if err != nil {
			t.Fatal(err)
		}
		type liveBuf struct {
			b   *Buffer
			tag byte
		}
		var live []liveBuf
		var open func()
		defer func() {
			if open != nil {
				open()
			}
		}()
		next := func() byte {
			if len(ops) == 0 {
				return 0
			}
			c := ops[0]
			ops = ops[1:]
			return c
		}
		for step := 0; len(ops) > 0; step++ {
			switch next() % 6 {
			case 0: // alloc: two bytes pick a size up to about 1 MiB, log-spread
				hi, lo := int(next()), int(next())
				n := (lo + 1) << (hi % 17) / 16
				b, err := a.Alloc(n)
				if err != nil {
					t.Fatalf("step %d: Alloc(%d): %v", step, n, err)
				}
				if n > 0 && (b.Cap() < n || b.Cap() > reuseLimit(n, a.RoundedSize(n))) {
					t.Fatalf("step %d: Alloc(%d) handed out %d bytes", step, n, b.Cap())
				}
				tag := byte(step) | 1
				if n > 0 {
					b.Bytes()[0], b.Bytes()[n-1] = tag, tag
				}
				live = append(live, liveBuf{b, tag})
			case 1: // free
				if len(live) > 0 {
					i := int(next()) % len(live)
					if err := a.Free(live[i].b); err != nil {
						t.Fatalf("step %d: Free: %v", step, err)
					}
					if err := a.Free(live[i].b); err == nil {
						t.Fatalf("step %d: double Free accepted", step)
					}
					live = slices.Delete(live, i, i+1)
				}
			case 2: // record the stream on a live buffer, behind a gate
				if len(live) > 0 {
					if open == nil {
						if open, err = sd.Gate(st); err != nil {
							t.Fatal(err)
						}
					}
					if err := a.RecordStream(live[int(next())%len(live)].b, st); err != nil {
						t.Fatalf("step %d: RecordStream: %v", step, err)
					}
				}
			case 3: // open the gate and let the stream run
				if open != nil {
					open()
					open = nil
					if err := st.Synchronize(); err != nil {
						t.Fatal(err)
					}
				}
			case 4:
				if err := a.EmptyCache(); err != nil {
					t.Fatalf("step %d: EmptyCache: %v", step, err)
				}
			case 5:
				a.Poll()
			}
			var inUse int64
			spans := make([][2]uintptr, 0, len(live))
			for _, l := range live {
				inUse += int64(l.b.Cap())
				if l.b.Len() == 0 {
					continue
				}
				mem := l.b.Bytes()
				if mem[0] != l.tag || mem[len(mem)-1] != l.tag {
					t.Fatalf("step %d: a live buffer of %d bytes was overwritten", step, len(mem))
				}
				spans = append(spans, [2]uintptr{addr(l.b), addr(l.b) + uintptr(l.b.Cap())})
			}
			slices.SortFunc(spans, func(x, y [2]uintptr) int { return cmp.Compare(x[0], y[0]) })
			for i := 1; i < len(spans); i++ {
				if spans[i][0] < spans[i-1][1] {
					t.Fatalf("step %d: live buffers overlap", step)
				}
			}
			s := a.Stats()
			if s.BytesInUse != inUse {
				t.Fatalf("step %d: BytesInUse %d, model %d", step, s.BytesInUse, inUse)
			}
			if s.BytesInUse+s.BytesPending+s.BytesCached > s.BytesReserved || s.BytesCached < 0 || s.BytesPending < 0 {
				t.Fatalf("step %d: byte counters inconsistent: %+v", step, s)
			}
		}
		for _, l := range live {
			if err := a.Free(l.b); err != nil {
				t.Fatal(err)
			}
		}
		if open != nil {
			open()
			open = nil
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		s := sd.Stats()
		if allocs, frees := s.HostAllocs-base.HostAllocs, s.HostFrees-base.HostFrees; allocs != frees {
			t.Fatalf("after Close: %d driver allocations, %d frees", allocs, frees)
		}
	})
}
