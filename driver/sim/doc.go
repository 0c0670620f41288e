// Package sim is accelkit's embedded default backend: a simulated device
// that behaves like a strict GPU, so every layer above the driver is tested
// on any machine, without cgo.
//
// Device memory is mmap'ed (a Ptr is the real address, so copies are
// memmoves) and its capacity is enforced; pinned host memory is mmap'ed
// pre-faulted with a best-effort mlock, and memory the caller owns can be
// registered as pinned in place (HostRegister, which pins Go memory with a
// runtime.Pinner); each stream runs its queue in order on its own goroutine
// and events mark positions in that order; VMM maps physical memory (a
// memfd) into reserved address ranges; LoadModule reads PTX and runs each
// kernel as the Go function registered under its name (RegisterKernel),
// block by block, in stream order on the device's memory. Misuse is an
// error, never silence: double free, unknown pointers, copies out of
// bounds or into freed memory, async copies from memory outside a live
// HostBuffer (or from a registration ended before they ran), overlapping
// registrations, unregistering what is not a live registration, use of
// destroyed streams and events, kernels touching memory outside a live
// allocation, use after Close. Once queued work on a stream has failed,
// the stream runs nothing more: its error is sticky, events recorded on it
// afterwards report it, and further copies and Memsets on it are refused
// with it; a kernel that faults also loses the device, as on CUDA. A nil
// Stream argument means the device's default stream, as the
// zero stream does in CUDA.
//
// The package builds for Linux, macOS, FreeBSD and Windows; the checks are the
// same everywhere, the memory underneath differs. macOS and FreeBSD have no
// MAP_POPULATE or memfd_create: pinned memory is pre-faulted by writing to
// each page and VMM memory is an unlinked temporary file (build with
// -tags simportable to use that path on Linux). Windows uses VirtualAlloc
// and VirtualLock and offers no VMM: DefaultConfig has it off and asking for
// it is driver.ErrNotSupported. The driver module's README has the details
// under Platforms.
//
// Importing the package registers it as "sim":
//
//	drv, err := driver.Open("sim", "devices=2,capacity=8GiB")
//
// Tests steer it through the hooks on *Device (reached with Hooks): Gate
// holds a stream until released, FailNthMalloc, SetFaultRate, FailStream and
// LoseDevice inject failures, and Stats counts calls.
package sim
