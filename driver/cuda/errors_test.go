package cuda

import (
	"errors"
	"testing"

	"github.com/accelkit/accelkit/driver"
)

func TestResultTable(t *testing.T) {
	tests := []struct {
		code     int
		name     string
		sentinel error
		poisons  bool
	}{
		{errInvalidValue, "CUDA_ERROR_INVALID_VALUE", driver.ErrInvalidValue, false},
		{errOutOfMemory, "CUDA_ERROR_OUT_OF_MEMORY", driver.ErrOutOfMemory, false},
		{errNotInitialized, "CUDA_ERROR_NOT_INITIALIZED", driver.ErrNoDevice, false},
		{errDeinitialized, "CUDA_ERROR_DEINITIALIZED", driver.ErrNoDevice, false},
		{errNoDevice, "CUDA_ERROR_NO_DEVICE", driver.ErrNoDevice, false},
		{errInvalidDevice, "CUDA_ERROR_INVALID_DEVICE", driver.ErrNoDevice, false},
		{errInvalidContext, "CUDA_ERROR_INVALID_CONTEXT", driver.ErrInvalidValue, false},
		{errInvalidHandle, "CUDA_ERROR_INVALID_HANDLE", driver.ErrInvalidValue, false},
		{errNotSupported, "CUDA_ERROR_NOT_SUPPORTED", driver.ErrNotSupported, false},
		{errECCUncorrectable, "CUDA_ERROR_ECC_UNCORRECTABLE", driver.ErrDeviceLost, true},
		{errNVLinkUncorrectable, "CUDA_ERROR_NVLINK_UNCORRECTABLE", driver.ErrDeviceLost, true},
		{errIllegalAddress, "CUDA_ERROR_ILLEGAL_ADDRESS", driver.ErrDeviceLost, true},
		{errLaunchTimeout, "CUDA_ERROR_LAUNCH_TIMEOUT", driver.ErrDeviceLost, true},
		{errAssert, "CUDA_ERROR_ASSERT", driver.ErrDeviceLost, true},
		{errHardwareStackError, "CUDA_ERROR_HARDWARE_STACK_ERROR", driver.ErrDeviceLost, true},
		{errIllegalInstruction, "CUDA_ERROR_ILLEGAL_INSTRUCTION", driver.ErrDeviceLost, true},
		{errMisalignedAddress, "CUDA_ERROR_MISALIGNED_ADDRESS", driver.ErrDeviceLost, true},
		{errInvalidAddressSpace, "CUDA_ERROR_INVALID_ADDRESS_SPACE", driver.ErrDeviceLost, true},
		{errInvalidPC, "CUDA_ERROR_INVALID_PC", driver.ErrDeviceLost, true},
		{errLaunchFailed, "CUDA_ERROR_LAUNCH_FAILED", driver.ErrDeviceLost, true},
		{errHostMemAlreadyRegistered, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", driver.ErrAlreadyRegistered, false},
		{errHostMemNotRegistered, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED", driver.ErrNotRegistered, false},
		{errNotReady, "CUDA_ERROR_NOT_READY", nil, false},
		{errInvalidImage, "CUDA_ERROR_INVALID_IMAGE", driver.ErrInvalidImage, false},
		{errNoBinaryForGPU, "CUDA_ERROR_NO_BINARY_FOR_GPU", driver.ErrInvalidImage, false},
		{errInvalidPTX, "CUDA_ERROR_INVALID_PTX", driver.ErrInvalidImage, false},
		{errUnsupportedPTXVersion, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", driver.ErrInvalidImage, false},
		{errJITCompilerNotFound, "CUDA_ERROR_JIT_COMPILER_NOT_FOUND", driver.ErrNotSupported, false},
		{errJITCompilationDisabled, "CUDA_ERROR_JIT_COMPILATION_DISABLED", driver.ErrNotSupported, false},
		{errNotFound, "CUDA_ERROR_NOT_FOUND", driver.ErrNotFound, false},
		{errLaunchOutOfResources, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", driver.ErrInvalidValue, false},
		{errUnknown, "CUDA_ERROR_UNKNOWN", nil, false},
	}
	for _, tc := range tests {
		e := newError("cuOp", tc.code, nil)
		if e.Op != "cuOp" || e.Code != tc.code || e.Name != tc.name || !errors.Is(e.Err, tc.sentinel) {
			t.Errorf("newError(%d) = %+v; want name %s, sentinel %v", tc.code, e, tc.name, tc.sentinel)
		}
		if tc.sentinel != nil && !errors.Is(e, tc.sentinel) {
			t.Errorf("errors.Is(%v, %v) = false", e, tc.sentinel)
		}
		if poisons(tc.code) != tc.poisons {
			t.Errorf("poisons(%d) = %v; want %v", tc.code, !tc.poisons, tc.poisons)
		}
	}
	if e := newError("cuX", 4242, func(int) string { return "CUDA_ERROR_FROM_DRIVER" }); e.Name != "CUDA_ERROR_FROM_DRIVER" {
		t.Errorf("unknown code named %q; want the driver's name", e.Name)
	}
	if e := newError("cuX", 4242, func(int) string { return "" }); e.Name != "CUDA_ERROR_4242" || e.Err != nil {
		t.Errorf("unnamed code = %+v; want CUDA_ERROR_4242 without a sentinel", e)
	}
	if got := newError("cuMemAlloc_v2", 2, nil).Error(); got != "cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (2): driver: out of memory" {
		t.Errorf("message %q", got)
	}
}
