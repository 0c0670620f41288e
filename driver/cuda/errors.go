package cuda

import (
	"errors"
	"fmt"

	"github.com/accelkit/accelkit/driver"
)

// CUresult codes the backend maps or names (cuda.h, CUDA 13). Only these
// are named here; other codes get their name from cuGetErrorName.
const (
	cudaSuccess                 = 0
	errInvalidValue             = 1
	errOutOfMemory              = 2
	errNotInitialized           = 3
	errDeinitialized            = 4
	errStubLibrary              = 34
	errDeviceUnavailable        = 46
	errNoDevice                 = 100
	errInvalidDevice            = 101
	errInvalidImage             = 200
	errInvalidContext           = 201
	errAlreadyMapped            = 208
	errNoBinaryForGPU           = 209
	errNotMapped                = 211
	errECCUncorrectable         = 214
	errPeerAccessUnsupported    = 217
	errInvalidPTX               = 218
	errNVLinkUncorrectable      = 220
	errJITCompilerNotFound      = 221
	errUnsupportedPTXVersion    = 222
	errJITCompilationDisabled   = 223
	errInvalidHandle            = 400
	errIllegalState             = 401
	errNotFound                 = 500
	errNotReady                 = 600
	errIllegalAddress           = 700
	errLaunchOutOfResources     = 701
	errLaunchTimeout            = 702
	errPeerAccessAlreadyEnabled = 704
	errPeerAccessNotEnabled     = 705
	errContextIsDestroyed       = 709
	errAssert                   = 710
	errHostMemAlreadyRegistered = 712
	errHostMemNotRegistered     = 713
	errHardwareStackError       = 714
	errIllegalInstruction       = 715
	errMisalignedAddress        = 716
	errInvalidAddressSpace      = 717
	errInvalidPC                = 718
	errLaunchFailed             = 719
	errNotPermitted             = 800
	errNotSupported             = 801
	errUnknown                  = 999
)

// resultInfo is what the backend knows about one CUresult: its cuda.h name
// and the sentinel it maps to.
type resultInfo struct {
	name     string
	sentinel error
}

// results maps CUresult codes to names and sentinels. The context-poisoning
// codes (CUDA's documentation: "the context cannot be used anymore") map to
// ErrDeviceLost, which the device makes sticky.
var results = map[int]resultInfo{
	errInvalidValue:             {"CUDA_ERROR_INVALID_VALUE", driver.ErrInvalidValue},
	errOutOfMemory:              {"CUDA_ERROR_OUT_OF_MEMORY", driver.ErrOutOfMemory},
	errNotInitialized:           {"CUDA_ERROR_NOT_INITIALIZED", driver.ErrNoDevice},
	errDeinitialized:            {"CUDA_ERROR_DEINITIALIZED", driver.ErrNoDevice},
	errStubLibrary:              {"CUDA_ERROR_STUB_LIBRARY", driver.ErrNoDevice},
	errDeviceUnavailable:        {"CUDA_ERROR_DEVICE_UNAVAILABLE", driver.ErrNoDevice},
	errNoDevice:                 {"CUDA_ERROR_NO_DEVICE", driver.ErrNoDevice},
	errInvalidDevice:            {"CUDA_ERROR_INVALID_DEVICE", driver.ErrNoDevice},
	errInvalidImage:             {"CUDA_ERROR_INVALID_IMAGE", driver.ErrInvalidImage},
	errInvalidContext:           {"CUDA_ERROR_INVALID_CONTEXT", driver.ErrInvalidValue},
	errAlreadyMapped:            {"CUDA_ERROR_ALREADY_MAPPED", driver.ErrInvalidValue},
	errNoBinaryForGPU:           {"CUDA_ERROR_NO_BINARY_FOR_GPU", driver.ErrInvalidImage},
	errNotMapped:                {"CUDA_ERROR_NOT_MAPPED", driver.ErrInvalidValue},
	errECCUncorrectable:         {"CUDA_ERROR_ECC_UNCORRECTABLE", driver.ErrDeviceLost},
	errPeerAccessUnsupported:    {"CUDA_ERROR_PEER_ACCESS_UNSUPPORTED", driver.ErrNotSupported},
	errInvalidPTX:               {"CUDA_ERROR_INVALID_PTX", driver.ErrInvalidImage},
	errNVLinkUncorrectable:      {"CUDA_ERROR_NVLINK_UNCORRECTABLE", driver.ErrDeviceLost},
	errJITCompilerNotFound:      {"CUDA_ERROR_JIT_COMPILER_NOT_FOUND", driver.ErrNotSupported},
	errUnsupportedPTXVersion:    {"CUDA_ERROR_UNSUPPORTED_PTX_VERSION", driver.ErrInvalidImage},
	errJITCompilationDisabled:   {"CUDA_ERROR_JIT_COMPILATION_DISABLED", driver.ErrNotSupported},
	errInvalidHandle:            {"CUDA_ERROR_INVALID_HANDLE", driver.ErrInvalidValue},
	errIllegalState:             {"CUDA_ERROR_ILLEGAL_STATE", driver.ErrInvalidValue},
	errNotFound:                 {"CUDA_ERROR_NOT_FOUND", driver.ErrNotFound},
	errNotReady:                 {"CUDA_ERROR_NOT_READY", nil},
	errIllegalAddress:           {"CUDA_ERROR_ILLEGAL_ADDRESS", driver.ErrDeviceLost},
	errLaunchOutOfResources:     {"CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", driver.ErrInvalidValue},
	errLaunchTimeout:            {"CUDA_ERROR_LAUNCH_TIMEOUT", driver.ErrDeviceLost},
	errPeerAccessAlreadyEnabled: {"CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED", driver.ErrInvalidValue},
	errPeerAccessNotEnabled:     {"CUDA_ERROR_PEER_ACCESS_NOT_ENABLED", driver.ErrInvalidValue},
	errContextIsDestroyed:       {"CUDA_ERROR_CONTEXT_IS_DESTROYED", driver.ErrDeviceLost},
	errAssert:                   {"CUDA_ERROR_ASSERT", driver.ErrDeviceLost},
	errHostMemAlreadyRegistered: {"CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", driver.ErrAlreadyRegistered},
	errHostMemNotRegistered:     {"CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED", driver.ErrNotRegistered},
	errHardwareStackError:       {"CUDA_ERROR_HARDWARE_STACK_ERROR", driver.ErrDeviceLost},
	errIllegalInstruction:       {"CUDA_ERROR_ILLEGAL_INSTRUCTION", driver.ErrDeviceLost},
	errMisalignedAddress:        {"CUDA_ERROR_MISALIGNED_ADDRESS", driver.ErrDeviceLost},
	errInvalidAddressSpace:      {"CUDA_ERROR_INVALID_ADDRESS_SPACE", driver.ErrDeviceLost},
	errInvalidPC:                {"CUDA_ERROR_INVALID_PC", driver.ErrDeviceLost},
	errLaunchFailed:             {"CUDA_ERROR_LAUNCH_FAILED", driver.ErrDeviceLost},
	errNotPermitted:             {"CUDA_ERROR_NOT_PERMITTED", driver.ErrNotSupported},
	errNotSupported:             {"CUDA_ERROR_NOT_SUPPORTED", driver.ErrNotSupported},
	errUnknown:                  {"CUDA_ERROR_UNKNOWN", nil},
}

// newError builds the *driver.Error for a failed call. lookup names codes
// the table does not know (cuGetErrorName); it may be nil or return "".
func newError(op string, code int, lookup func(int) string) *driver.Error {
	info, ok := results[code]
	if !ok && lookup != nil {
		info.name = lookup(code)
	}
	if info.name == "" {
		info.name = fmt.Sprintf("CUDA_ERROR_%d", code)
	}
	return &driver.Error{Op: op, Code: code, Name: info.name, Err: info.sentinel}
}

// poisons reports whether code leaves the context unusable: every later
// call on the device must fail with ErrDeviceLost.
func poisons(code int) bool {
	info, ok := results[code]
	return ok && errors.Is(info.sentinel, driver.ErrDeviceLost)
}
