//go:build linux && cgo

package cuda

/*
#include "shim.h"
*/
import "C"

import (
	"unsafe"

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

// rawLaunchLoop makes n cuLaunchKernel calls of k on s (nil: the default
// stream) with args in one cgo call, after one context step and one
// kernelParams build: what a C program's launch loop costs, the baseline
// of the launch benchmark.
func (k *kernel) rawLaunchLoop(n int, grid, block uint32, s *stream, args *driver.Args) error {
	d := k.m.d
	buf, offs, _ := args.Buffer()
	var pbuf *C.uchar
	var poffs *C.uint
	if len(offs) > 0 {
		pbuf = (*C.uchar)(unsafe.Pointer(unsafe.SliceData(buf)))
		poffs = (*C.uint)(unsafe.Pointer(unsafe.SliceData(offs)))
	}
	var sh C.CUstream
	if s != nil {
		sh = s.h
	}
	return d.result("raw launch loop", C.ak_raw_launch_loop(d.l, d.ctx, k.f, C.long(n), C.uint(grid), C.uint(block), sh, pbuf, poffs, C.int(len(offs))))
}
