// Package cudatest builds a fake libcuda for tests of code that runs on
// driver/cuda, in this module or any other (devalloc/capi's harnesses load
// it into C and Python processes).
//
// Build compiles the fake's C source (embedded in this package, so it works
// from the module cache too) once per process with the system C compiler
// ($CC, else cc), then links one shared library per call into the test's
// temporary directory. Each library is its own file without a soname, so
// every Build is an independent instance with its own devices, counters
// and injected faults. Point driver/cuda at Lib.Path through its DSN
// ("lib=PATH") or the ACCELKIT_LIBCUDA variable. BuildWith sets variables
// before the library loads, leaves entry points out, and under go test
// -asan can build the fake with AddressSanitizer.
//
// The fake serves host memory as device memory on two devices (variables
// read when the library loads: FAKECUDA_DEVICES, FAKECUDA_CAPACITY_MIB,
// FAKECUDA_VMM, FAKECUDA_HOST_REGISTER, FAKECUDA_FAIL=name:code[:after[:times]]),
// keeps a current context per thread as CUDA does, runs stream work at
// enqueue, and treats the stream handles 0, CU_STREAM_LEGACY (0x1) and
// CU_STREAM_PER_THREAD (0x2) as the context's default stream. The C source
// documents the rest.
package cudatest

import _ "embed"

// Source is the fake libcuda's C source.
//
//go:embed testdata/fakecuda.c
var Source string

// Variables the fake reads when it loads.
const (
	EnvDevices     = "FAKECUDA_DEVICES"      // number of devices, 1..8 (default 2)
	EnvCapacityMiB = "FAKECUDA_CAPACITY_MIB" // memory per device (default 1024)
	EnvFail        = "FAKECUDA_FAIL"         // name:code[:after[:times]],...
)
