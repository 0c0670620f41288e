package devalloc_test

import (
	"bytes"
	"fmt"

	"github.com/accelkit/accelkit/devalloc"
	"github.com/accelkit/accelkit/devalloc/memsnap"
	"github.com/accelkit/accelkit/driver"
	_ "github.com/accelkit/accelkit/driver/sim"
)

func ExampleNew() {
	drv, _ := driver.Open("sim", "capacity=1GiB")
	defer drv.Close()
	dev, _ := drv.Device(0)
	a, err := devalloc.New(dev, devalloc.Config{})
	if err != nil {
		panic(err)
	}
	defer a.Close()
	s := dev.DefaultStream()
	p, _ := a.Alloc(1000, s)
	_ = a.Free(p)
	q, _ := a.Alloc(1000, s) // served from the cache
	st := a.Stats()
	fmt.Println(p == q, st.NumDeviceAlloc, st.AllocatedBytes.All().Current, st.ReservedBytes.All().Current)
	// Output: true 1 1024 2097152
}

func ExampleParseConfig() {
	cfg, err := devalloc.ParseConfig("expandable_segments:true,max_split_size_mb:128,roundup_power2_divisions:[256:1,512:2,>:8]")
	if err != nil {
		panic(err)
	}
	fmt.Println(cfg.ExpandableSegments, cfg.MaxSplitSize>>20, cfg.RoundupPower2Divisions[9], cfg.RoundupPower2Divisions[15])
	_, err = devalloc.ParseConfig("max_split_size_mb:8")
	fmt.Println(err)
	// Output:
	// true 128 2 8
	// devalloc: bad allocator config: max_split_size_mb "8": want an integer in [21, 17592186044415]
}

func ExampleAllocator_RecordStream() {
	drv, _ := driver.Open("sim", "")
	defer drv.Close()
	dev, _ := drv.Device(0)
	a, _ := devalloc.New(dev, devalloc.Config{})
	defer a.Close()
	compute := dev.DefaultStream()
	copier, _ := dev.NewStream()

	p, _ := a.Alloc(4096, compute)
	_ = dev.Memset(p, 0, 4096, copier) // p is also used on copier
	_ = a.RecordStream(p, copier)
	_ = a.Free(p) // reusable once copier's queued work is done
	_ = a.Drain()
	q, _ := a.Alloc(4096, compute)
	fmt.Println(q == p)
	// Output: true
}

// ExampleOpen picks the resource from configuration text, as PyTorch's
// PYTORCH_CUDA_ALLOC_CONF does: here the uncached passthrough baseline.
func ExampleOpen() {
	drv, _ := driver.Open("sim", "capacity=1GiB")
	defer drv.Close()
	dev, _ := drv.Device(0)
	cfg, err := devalloc.ParseConfig("backend:passthrough")
	if err != nil {
		panic(err)
	}
	r, err := devalloc.Open(dev, cfg)
	if err != nil {
		panic(err)
	}
	defer r.Close()
	for range 3 {
		p, _ := r.Alloc(1000, nil) // nil: the default stream
		_ = r.Free(p)
	}
	st := r.Stats()
	fmt.Printf("%T %s %d device allocations\n", r, st.Backend, st.NumDeviceAlloc)
	// Output: *devalloc.Passthrough passthrough 3 device allocations
}

func ExampleAllocator_RecordHistory() {
	drv, _ := driver.Open("sim", "")
	defer drv.Close()
	dev, _ := drv.Device(0)
	a, _ := devalloc.New(dev, devalloc.Config{})
	defer a.Close()
	s := dev.DefaultStream()

	// Like torch.cuda.memory._record_memory_history(max_entries=1000).
	if err := a.RecordHistory(devalloc.HistoryOptions{MaxEntries: 1000}); err != nil {
		panic(err)
	}
	p, _ := a.Alloc(1000, s)
	snap := a.Snapshot()
	for _, e := range snap.DeviceTraces[dev.Ordinal()] {
		fmt.Println(e.Action, e.Size, len(e.Frames) > 0)
	}
	fmt.Println("live block has its allocating stack:", len(snap.Segments[0].Blocks[0].Frames) > 0)

	// Like _record_memory_history(enabled=None): stop and clear.
	_ = a.RecordHistory(devalloc.HistoryOptions{Enabled: devalloc.HistoryOff})
	_ = a.Free(p)
	fmt.Println(len(a.Snapshot().DeviceTraces[dev.Ordinal()]), "entries")
	// Output:
	// segment_alloc 2097152 true
	// alloc 1000 true
	// live block has its allocating stack: true
	// 0 entries
}

func ExampleSnapshot_WritePickle() {
	drv, _ := driver.Open("sim", "")
	defer drv.Close()
	dev, _ := drv.Device(0)
	a, _ := devalloc.New(dev, devalloc.Config{})
	defer a.Close()
	p, _ := a.Alloc(1000, dev.DefaultStream())
	defer a.Free(p)

	// The file torch.cuda.memory._dump_snapshot writes: open it at
	// https://pytorch.org/memory_viz or with python -m
	// torch.cuda._memory_viz. (WriteSnapshot("snap.json") writes it beside
	// the JSON, as snap.pickle.)
	var buf bytes.Buffer
	if err := a.Snapshot().WritePickle(&buf); err != nil {
		panic(err)
	}
	fmt.Printf("protocol %d, %v\n", buf.Bytes()[1], buf.Len() > 0)
	fmt.Println(memsnap.PicklePath("/tmp/snap.json"))
	// Output:
	// protocol 2, true
	// /tmp/snap.pickle
}
