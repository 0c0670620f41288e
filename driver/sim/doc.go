// Package sim is accelkit's embedded default backend: a simulated device
// that behaves like a strict GPU, so every layer above the driver is tested
// on any Linux machine.
//
// Device memory is mmap'ed (a Ptr is the real address, so copies are
// memmoves) and its capacity is enforced; pinned host memory is mmap'ed
// pre-faulted with a best-effort mlock; each stream runs its queue in order
// on its own goroutine and events mark positions in that order; VMM maps
// memfd-backed physical memory into reserved address ranges. Misuse is an
// error, never silence: double free, unknown pointers, copies out of bounds
// or into freed memory, async copies from memory outside a live HostBuffer,
// use of destroyed streams and events, use after Close. Once queued work on
// a stream has failed, the stream runs nothing more: its error is sticky,
// events recorded on it afterwards report it, and further copies and
// Memsets on it are refused with it. A nil Stream argument means the
// device's default stream, as the zero stream does in CUDA.
//
// The package needs Linux (mmap flags, mlock, memfd_create).
//
// Importing the package registers it as "sim":
//
//	drv, err := driver.Open("sim", "devices=2,capacity=8GiB,vmm=true")
//
// Tests steer it through the hooks on *Device (reached with Hooks): Gate
// holds a stream until released, FailNthMalloc, SetFaultRate, FailStream and
// LoseDevice inject failures, and Stats counts calls.
package sim
