// Package hostpin is accelkit's pinned host memory layer: a caching
// allocator of page-locked host buffers and a Stager that copies between
// pageable Go memory and device memory through them.
//
// Asynchronous host<->device copies need page-locked memory outside the Go
// heap (a driver.HostBuffer), and getting it from the driver is slow (0.8 ms
// for 4 KiB, 123 ms for 256 MiB on an H100 machine), so Allocator caches it:
//
//	a, err := hostpin.New(dev, hostpin.Options{})
//	buf, err := a.Alloc(n)                  // buf.Bytes() has length n
//	err = dev.CopyHtoD(dst, buf.Bytes(), s) // async: reads buf later
//	err = a.RecordStream(buf, s)            // reuse waits for the work on s
//	err = a.Free(buf)
//
// Sizes round up to classes, four per power of two (at most 1.25x the
// request); classes below 64 KiB are carved from shared 1 MiB slabs; above
// 64 MiB sizes round to the page only. A freed buffer is reused only after
// the work queued at Free time on the streams given to RecordStream has
// completed (events from evpool). Idle bytes are capped (2 GiB) and
// EmptyCache returns idle memory to the driver, as an Alloc that runs out of
// pinned memory does before it tries once more. Direct has the same surface
// without the cache (every Alloc and Free goes to the driver), for A/B runs.
// Stats.Map names the counters as PyTorch's torch.cuda.host_memory_stats()
// does.
//
// Stager copies ordinary Go slices through pinned chunks: the workers of a
// call each carry whole chunks (host copy, DMA, event), so their host
// copies overlap one another and the DMAs; every call owns its slots and
// workers, so any number of goroutines may copy at once; and copies below
// 64 KiB use the driver's synchronous copies directly:
//
//	sg, err := hostpin.NewStager(a, hostpin.StagerOptions{})
//	err = sg.CopyHtoD(ctx, dst, src, s) // returns once src may be reused
//	err = sg.CopyDtoH(ctx, out, dst, s) // returns once out is filled
//
// A buffer the caller reuses can be registered (Stager.Register: page-locked
// in place where the device offers driver.HostRegisterDevice); copies from
// or into it are then one DMA, with no staging.
//
// A nil stream is the device's default stream, in RecordStream and in the
// Stager's copies. Allocator, Direct and Stager are safe for concurrent use.
// The package takes a driver.Device and never opens a backend itself.
package hostpin
