// Package evpool gives stream-ordered code its event plumbing over any
// driver.Device:
//
//   - Pool recycles a device's events, so hot paths that record a marker per
//     operation do not create and destroy an event each time. The idle set
//     is bounded (PoolOptions.MaxIdle) and Stats counts what was created,
//     reused and destroyed.
//
//   - Deferred runs a callback once the work queued on some streams at the
//     time of the call has finished: "free this block when the kernels that
//     read it are done". It records a pooled event per stream and keeps one
//     FIFO per stream. Events on one stream complete in order, so Poll asks
//     only each stream's head event whether it is done and costs
//     O(streams with pending work), never O(pending callbacks). A sticky
//     stream error reaches every callback waiting on that stream.
//
//   - Deferred.Release is stream-ordered release, the one protocol the
//     caching allocators (devalloc, hostpin) share: free memory once the
//     work on the streams that used it is over, with one written failure
//     policy (wait on the host when no event can be recorded; hand the
//     memory back, never release early, when even that fails). StreamSet
//     holds the streams to wait for, and SameStream is accelkit's one
//     notion of stream identity.
//
//   - Handles keeps one costly library handle (a BLAS or DNN context) per
//     (device, stream), made on first use and destroyed by Close; a hit takes
//     no exclusive lock.
//
// Pool, Deferred and Handles are safe for concurrent use. evpool never opens a driver: it
// takes a driver.Device (or the streams of one) from its caller, so it works
// the same on the simulated device and on CUDA.
//
// Devices are identified by their ordinal and streams by (device ordinal,
// stream ID), so one Pool, Deferred or Handles serves the devices of a
// single driver.
package evpool
