package cudatest

// Options change what BuildWith builds.
type Options struct {
	// Env is set with tb.Setenv before the library loads, for the
	// FAKECUDA_* variables the fake reads then (EnvDevices, ...).
	Env map[string]string
	// Omit names entry points the library leaves out (a linker version
	// script makes them local), to test a driver that lacks them.
	Omit []string
	// ASan builds the library with AddressSanitizer when the test binary
	// has it (go test -asan), so that the fake's own accesses to the memory
	// it serves are checked too. Only for a library used in this process: a
	// child process that loads it needs the ASan runtime.
	ASan bool
}

// Region kinds for Lib.Live.
const (
	LiveDevice  = 0 // cuMemAlloc_v2 allocations
	LiveHost    = 1 // cuMemHostAlloc allocations
	LiveReserve = 2 // cuMemAddressReserve reservations
	LiveMap     = 3 // cuMemMap mappings
	LiveHostReg = 4 // cuMemHostRegister_v2 registrations
)
