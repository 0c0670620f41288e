// Package driver is the thin device layer of accelkit: the types and
// interfaces every backend implements (Driver, Device, Stream, Event,
// HostBuffer), the optional capabilities found by type assertion (VMM for
// expandable segments, Peer for peer access, PropertiesDevice,
// HostRegisterDevice for pinning existing host memory in place), the error
// sentinels every backend's failures unwrap to, and a registry that backends
// join by blank import, in the shape of database/sql.
//
// Backends live in sub-packages: driver/sim, the strict simulated device
// that is the embedded default, and driver/cuda, which loads libcuda at run
// time. driver/drivertest is the conformance suite both pass. driver/nvrtc
// compiles CUDA C++ to PTX or cubin at run time with NVRTC, loaded like
// libcuda. What only a
// backend's author needs (each device's lifecycle and argument checks,
// Compose for the optional capabilities, DSN parsing) is driver/backendkit,
// apart from this package as database/sql/driver is apart from
// database/sql; backends join this package's registry.
//
// A program chooses a backend; libraries take a Device:
//
//	import (
//		"github.com/accelkit/accelkit/driver"
//		_ "github.com/accelkit/accelkit/driver/cuda"
//		_ "github.com/accelkit/accelkit/driver/sim"
//	)
//
//	drv, err := driver.Open("auto", "") // CUDA when a device is there, else sim
//
// ACCELKIT_DRIVER=name[:dsn] overrides the choice of "auto", for example
// ACCELKIT_DRIVER=sim:devices=2,capacity=8GiB.
//
// Errors: sentinels (ErrOutOfMemory, ErrInvalidPointer, ...) matched with
// errors.Is; backend failures are *Error values that unwrap to them. A failure
// of queued work is sticky on its stream; ErrDeviceLost is sticky on the
// whole device.
package driver
