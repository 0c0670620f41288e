//go:build linux && cgo

package cuda

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"

	"github.com/accelkit/accelkit/driver"
)

// rawOp is a raw driver call that rawLoop can repeat.
type rawOp int

const (
	rawCtxGet      = rawOp(C.AK_RAW_CTX_GET)      // cuCtxGetCurrent
	rawEventQuery  = rawOp(C.AK_RAW_EVENT_QUERY)  // cuEventQuery(e)
	rawStreamQuery = rawOp(C.AK_RAW_STREAM_QUERY) // cuStreamQuery(s)
	rawEventRecord = rawOp(C.AK_RAW_EVENT_RECORD) // cuEventRecord(e, s)
	rawMallocFree  = rawOp(C.AK_RAW_MALLOC_FREE)  // cuMemAlloc_v2(size) + cuMemFree_v2
)

// rawLoop makes n raw driver calls of kind op in one cgo call, without the
// backend around them: what the driver itself costs per call, so the
// benchmarks report the shim's own cost as the difference measured in the
// same run. e and s may be nil where op does not use them.
func (d *device) rawLoop(op rawOp, n int, e *event, s *stream, size uint64) error {
	var eh C.CUevent
	var sh C.CUstream
	if e != nil {
		eh = e.h
	}
	if s != nil {
		sh = s.h
	}
	return d.result("raw loop", C.ak_raw_loop(d.l, d.ctx, C.int(op), C.long(n), eh, sh, C.size_t(size)))
}

// RawLaunchLoop launches k n times on s (nil: the device's default
// stream) with cfg and args as a C program's loop of cuLaunchKernel calls
// does: one cgo call, one context step and one kernelParams array for all
// n. It is the baseline that benchmarks set beside Kernel.Launch, which
// pays a checked cgo call per launch; programs launch with Kernel.Launch.
//
// cfg and args are checked once, as Launch checks them. A kernel that is
// not this backend's, a stream of another device or backend, n < 0 and a
// kernel whose module was unloaded are refused before any launch with an
// error wrapping driver.ErrInvalidValue. The loop stops at the first
// launch the driver refuses and returns its error (mapped as Launch's);
// the launches before it stay queued. Module.Unload waits for a loop in
// progress to finish queueing.
func RawLaunchLoop(k driver.Kernel, s driver.Stream, cfg driver.LaunchConfig, args *driver.Args, n int) error {
	kk, ok := k.(*kernel)
	if !ok || kk == nil {
		return fmt.Errorf("cuda: RawLaunchLoop: kernel %T is not a kernel of the cuda backend (load it with this backend's LoadModule): %w", k, driver.ErrInvalidValue)
	}
	d := kk.m.d
	if n < 0 {
		return fmt.Errorf("cuda device %d: RawLaunchLoop of %s: %d launches; want n >= 0: %w", d.ordinal, kk.name, n, driver.ErrInvalidValue)
	}
	a, err := kk.prepare("RawLaunchLoop", "RawLaunchLoop", s, cfg, args)
	if err != nil {
		return err
	}
	kk.m.mu.RLock()
	defer kk.m.mu.RUnlock()
	if kk.m.unloaded {
		return kk.m.unloadedError("RawLaunchLoop of " + kk.name)
	}
	r := C.ak_raw_launch_loop(d.l, d.ctx, kk.f, C.long(n), a.gx, a.gy, a.gz, a.bx, a.by, a.bz, a.shared, a.st.h, a.buf, a.offs, a.n)
	if r != 0 {
		return fmt.Errorf("cuda device %d: RawLaunchLoop of %s (grid %s, block %s): %w", d.ordinal, kk.name, cfg.Grid, cfg.Block, d.result("cuLaunchKernel", r))
	}
	return nil
}
