// Package evpool gives stream-ordered code three pieces of event plumbing
// over any driver.Device:
//
//   - Pool recycles a device's events, so hot paths that record a marker per
//     operation do not create and destroy an event each time. The idle set
//     is bounded (WithMaxIdle) and Stats counts what was created, reused and
//     destroyed.
//
//   - Deferred runs a callback once the work queued on some streams at the
//     time of the call has finished: "free this block when the kernels that
//     read it are done". It records a pooled event per stream and keeps one
//     FIFO per stream. Events on one stream complete in order, so Poll asks
//     only each stream's head event whether it is done and costs
//     O(streams with pending work), never O(pending callbacks). A sticky
//     stream error reaches every callback waiting on that stream.
//
//   - Handles keeps one costly library handle (a BLAS or DNN context) per
//     (device, stream), made on first use and destroyed by Close; a hit takes
//     no exclusive lock.
//
// All three are safe for concurrent use. evpool never opens a driver: it
// takes a driver.Device (or the streams of one) from its caller, so it works
// the same on the simulated device and on CUDA.
//
// Devices are identified by their ordinal and streams by (device ordinal,
// stream ID), so one Pool, Deferred or Handles serves the devices of a
// single driver.
package evpool
