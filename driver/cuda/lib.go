//go:build linux && cgo

package cuda

/*
#cgo LDFLAGS: -ldl
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"os"
	"sync"
	"unsafe"

	"github.com/accelkit/accelkit/driver"
)

// EnvLibrary names the environment variable that points the backend at a
// libcuda other than the dynamic loader's "libcuda.so.1".
const EnvLibrary = "ACCELKIT_LIBCUDA"

// defaultLibrary is the soname the NVIDIA driver installs.
const defaultLibrary = "libcuda.so.1"

// lib is one loaded libcuda: its entry-point table, and which optional
// groups it lacks. It is immutable after load and lives for the rest of the
// process: unloading a CUDA driver with live contexts is never safe.
type lib struct {
	c       *C.ak_lib
	path    string
	version int      // cuDriverGetVersion, e.g. 13000
	vmm     bool     // every VMM entry point is there
	peer    bool     // every peer entry point is there
	hostReg bool     // cuMemHostRegister_v2 and cuMemHostUnregister are there
	library bool     // cuLibraryLoadData, cuLibraryGetKernel, cuLibraryUnload (CUDA 12.0)
	module  bool     // cuModuleLoadDataEx, cuModuleGetFunction, cuModuleUnload
	launch  bool     // cuLaunchKernel
	missing []string // optional entry points that are not there
}

// libs caches loaded libraries by path, so cuInit runs once per library. A
// failed load or cuInit is not cached: the next Open tries again and reports
// its own error. This is the package's only global state besides the
// registration, and it mirrors the process-wide state of the driver itself.
var libs struct {
	mu sync.Mutex // guards m; held across load and cuInit
	m  map[string]*lib
}

// loadLib returns the library at path, loading and initialising it once.
func loadLib(path string) (*lib, error) {
	libs.mu.Lock()
	defer libs.mu.Unlock()
	if l, ok := libs.m[path]; ok {
		return l, nil
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var msg [512]C.char
	var missing C.int
	cl := C.ak_open(cpath, &msg[0], C.size_t(len(msg)), &missing)
	if cl == nil {
		text := C.GoString(&msg[0])
		if missing != 0 {
			return nil, fmt.Errorf("cuda: %s has no entry point %s (driver too old, or not a CUDA driver library): %w",
				path, text, driver.ErrNotSupported)
		}
		return nil, fmt.Errorf("cuda: cannot load the CUDA driver library: %s (install the NVIDIA driver, or set %s to the path of libcuda.so.1): %w",
			text, EnvLibrary, driver.ErrNoDevice)
	}
	l := &lib{c: cl, path: path, vmm: true, peer: true, hostReg: true, library: true, module: true, launch: true}
	for i := range C.int(C.AK_NSYMS) {
		if C.ak_sym_present(cl, i) != 0 {
			continue
		}
		switch C.ak_sym_group(i) {
		case C.AK_VMM:
			l.vmm = false
		case C.AK_PEER:
			l.peer = false
		case C.AK_HOSTREG:
			l.hostReg = false
		case C.AK_LIBRARY:
			l.library = false
		case C.AK_MODULE:
			l.module = false
		case C.AK_LAUNCH:
			l.launch = false
		}
		l.missing = append(l.missing, C.GoString(C.ak_sym_name(i)))
	}
	if r := int(C.ak_init(cl)); r != 0 {
		// The table stays allocated and the library loaded: dlclose of a
		// driver is not safe, and the next Open reuses the mapping.
		C.free(unsafe.Pointer(cl))
		return nil, fmt.Errorf("cuda: %s: %w", path, l.error("cuInit", r))
	}
	var v C.int
	if r := int(C.ak_driver_version(cl, &v)); r != 0 {
		C.free(unsafe.Pointer(cl))
		return nil, fmt.Errorf("cuda: %s: %w", path, l.error("cuDriverGetVersion", r))
	}
	l.version = int(v)
	if libs.m == nil {
		libs.m = map[string]*lib{}
	}
	libs.m[path] = l
	return l, nil
}

// libraryPath is the library Open loads: the DSN's lib, else
// ACCELKIT_LIBCUDA, else libcuda.so.1.
func libraryPath(dsnLib string) string {
	if dsnLib != "" {
		return dsnLib
	}
	if p := os.Getenv(EnvLibrary); p != "" {
		return p
	}
	return defaultLibrary
}

// error maps a CUresult from op to a *driver.Error; the context-step bits
// of the shim rename op to the call that failed.
func (l *lib) error(op string, r int) *driver.Error {
	switch {
	case r&C.AK_IN_GET != 0:
		op = "cuCtxGetCurrent"
	case r&C.AK_IN_SET != 0:
		op = "cuCtxSetCurrent"
	case r&C.AK_IN_SYNC != 0:
		op = "cuStreamSynchronize"
	case r&C.AK_IN_CTXSYNC != 0:
		op = "cuCtxSynchronize"
	}
	return newError(op, r&C.AK_CODE_MASK, l.errorName)
}

// errorName asks the driver for the name of a code the table lacks.
func (l *lib) errorName(code int) string {
	s := C.ak_error_name(l.c, C.CUresult(code))
	if s == nil {
		return ""
	}
	return C.GoString(s)
}

func (l *lib) versionString() string {
	return fmt.Sprintf("%d.%d", l.version/1000, l.version%1000/10)
}
