package hostpin_test

import (
	"bytes"
	"context"
	"fmt"
	"log"

	"github.com/accelkit/accelkit/driver"
	_ "github.com/accelkit/accelkit/driver/sim"
	"github.com/accelkit/accelkit/hostpin"
)

// A pinned buffer is allocated, used for an asynchronous copy on a stream,
// and freed with RecordStream: it is handed out again only once the copy
// has run. The second Alloc of the same size is served from the cache.
func ExampleAllocator() {
	drv, err := driver.Open("sim", "")
	if err != nil {
		log.Fatal(err)
	}
	defer drv.Close()
	dev, _ := drv.Device(0)

	a, err := hostpin.New(dev, hostpin.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	st, _ := dev.NewStream()
	defer st.Destroy()
	dptr, _ := dev.Malloc(1 << 20)
	defer dev.Free(dptr)

	buf, err := a.Alloc(1000_000)
	if err != nil {
		log.Fatal(err)
	}
	copy(buf.Bytes(), "hello")
	if err := dev.CopyHtoD(dptr, buf.Bytes(), st); err != nil { // async: buf must stay pinned
		log.Fatal(err)
	}
	a.RecordStream(buf, st) // reuse waits for the copy queued on st
	a.Free(buf)

	st.Synchronize()
	again, _ := a.Alloc(1000_000)
	defer a.Free(again)
	s := a.Stats()
	fmt.Printf("len %d, block %d, requests %d, hits %d, driver allocations %d\n",
		again.Len(), again.Cap(), s.Requests, s.Hits, s.DriverAllocs)
	// Output: len 1000000, block 1048576, requests 2, hits 1, driver allocations 1
}

// The Stager copies pageable Go memory to and from the device through
// pinned chunks; CopyHtoD returns as soon as src may be reused.
func ExampleStager() {
	drv, err := driver.Open("sim", "")
	if err != nil {
		log.Fatal(err)
	}
	defer drv.Close()
	dev, _ := drv.Device(0)
	a, _ := hostpin.New(dev, hostpin.Options{})
	defer a.Close()
	sg, err := hostpin.NewStager(a, hostpin.StagerOptions{})
	if err != nil {
		log.Fatal(err)
	}

	st, _ := dev.NewStream()
	defer st.Destroy()
	src := bytes.Repeat([]byte("accelkit"), 3<<20) // 24 MiB of ordinary Go memory
	dptr, _ := dev.Malloc(uint64(len(src)))
	defer dev.Free(dptr)

	ctx := context.Background()
	if err := sg.CopyHtoD(ctx, dptr, src, st); err != nil {
		log.Fatal(err)
	}
	back := make([]byte, len(src))
	if err := sg.CopyDtoH(ctx, back, dptr, st); err != nil { // ordered after the upload on st
		log.Fatal(err)
	}
	fmt.Println(bytes.Equal(back, src), a.Stats().BytesInUse)
	// Output: true 0
}

func ExampleStager_Register() {
	drv, err := driver.Open("sim", "")
	if err != nil {
		log.Fatal(err)
	}
	defer drv.Close()
	dev, _ := drv.Device(0)
	a, _ := hostpin.New(dev, hostpin.Options{})
	defer a.Close()
	sg, _ := hostpin.NewStager(a, hostpin.StagerOptions{})

	// A batch buffer the program fills and uploads again and again:
	// registered once, each upload is one DMA, with no staging copy.
	batch := make([]byte, 8<<20)
	r, err := sg.Register(batch)
	if err != nil {
		log.Fatal(err) // driver.ErrNotSupported: the device cannot register memory
	}
	defer r.Close()

	dptr, _ := dev.Malloc(uint64(len(batch)))
	defer dev.Free(dptr)
	for step := range 3 {
		for i := range batch {
			batch[i] = byte(step)
		}
		if err := sg.CopyHtoD(context.Background(), dptr, batch, nil); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println(a.Stats().Requests) // no staging chunk was taken
	// Output: 0
}

// Stats.Map gives the counters under the names of PyTorch's
// torch.cuda.host_memory_stats(), for dashboards and scripts written
// against PyTorch. Here a 4 KiB buffer came from a 1 MiB slab and a
// 100 KiB one (112 KiB block) was freed: two driver allocations are held,
// one buffer is active.
func ExampleStats_Map() {
	drv, err := driver.Open("sim", "")
	if err != nil {
		log.Fatal(err)
	}
	defer drv.Close()
	dev, err := drv.Device(0)
	if err != nil {
		log.Fatal(err)
	}
	a, err := hostpin.New(dev, hostpin.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()

	small, err := a.Alloc(4 << 10)
	if err != nil {
		log.Fatal(err)
	}
	defer a.Free(small)
	mid, err := a.Alloc(100 << 10)
	if err != nil {
		log.Fatal(err)
	}
	if err := a.Free(mid); err != nil {
		log.Fatal(err)
	}

	m := a.Stats().Map()
	for _, k := range []string{
		"allocations.current", "allocated_bytes.current",
		"active_requests.current", "active_requests.peak", "active_bytes.current",
		"num_host_alloc", "host_alloc_time.count",
	} {
		fmt.Println(k, m[k])
	}
	// Output:
	// allocations.current 2
	// allocated_bytes.current 1163264
	// active_requests.current 1
	// active_requests.peak 2
	// active_bytes.current 4096
	// num_host_alloc 2
	// host_alloc_time.count 2
}
