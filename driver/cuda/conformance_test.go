//go:build linux && cgo

package cuda

import (
	"testing"
	"unsafe"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/backendkit"
	"github.com/accelkit/accelkit/driver/cuda/cudatest"
	"github.com/accelkit/accelkit/driver/drivertest"
)

// faultDevice adds drivertest.Faults to a device of the fake: the faults
// are injected inside the fake libcuda, so they reach the backend the way a
// GPU fault does, as a CUresult that poisons the context.
type faultDevice struct {
	*device
	faults
}

type faults struct {
	d *device
	l *cudatest.Lib
}

// FailStream makes the next work queued on s fault with
// CUDA_ERROR_LAUNCH_FAILED, which poisons the device's context.
func (f faults) FailStream(s driver.Stream) {
	st := s.(*stream)
	if err := f.l.FailStream(f.d.ordinal, unsafe.Pointer(st.h), errLaunchFailed); err != nil {
		panic(err)
	}
}

// LoseDevice poisons the context with CUDA_ERROR_ILLEGAL_ADDRESS.
func (f faults) LoseDevice() {
	if err := f.l.Poison(f.d.ordinal, errIllegalAddress); err != nil {
		panic(err)
	}
}

// runWithFaults runs drivertest.Run on fake l, its devices offering
// drivertest.Faults.
func runWithFaults(t *testing.T, l *cudatest.Lib) {
	drivertest.Run(t, func(t *testing.T) driver.Driver {
		drv, err := open("lib="+l.Path, func(d *device) driver.Device {
			return backendkit.Compose(&faultDevice{d, faults{d, l}}, d.capabilities())
		})
		if err != nil {
			t.Fatal(err)
		}
		return drv
	})
}

func TestConformanceFake(t *testing.T) {
	l := buildFake(t, nil)
	runWithFaults(t, l)
	if n := l.Counter("ctx_mismatch"); n != 0 {
		t.Errorf("%d stream or event operations ran with another context current", n)
	}
}

// TestConformanceFakeWithoutVMM runs the suite on devices that report no VMM
// support and a library without the peer entry points.
func TestConformanceFakeWithoutVMM(t *testing.T) {
	l := buildFake(t, map[string]string{"FAKECUDA_VMM": "0"}, "cuMemcpyPeerAsync")
	drivertest.Run(t, func(t *testing.T) driver.Driver {
		drv, err := Open("lib=" + l.Path)
		if err != nil {
			t.Fatal(err)
		}
		return drv
	})
}

// TestConformanceFakeModuleLoader runs the suite on a library without the
// cuLibrary* loader, so the Launcher rules run on the cuModuleLoadDataEx
// fallback.
func TestConformanceFakeModuleLoader(t *testing.T) {
	l := buildFake(t, nil, libraryLoader...)
	runWithFaults(t, l)
	if n := l.Counter("launch_module_function"); n == 0 {
		t.Error("the suite launched nothing through the module fallback")
	}
}
