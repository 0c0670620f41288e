// Package backendkit is the kit for writing an accelkit driver backend,
// kept apart from package driver, which is what users import, as
// database/sql/driver is kept apart from database/sql. A program or
// library that uses devices needs only package driver; sim and cuda, and
// any other backend, import this package too.
//
// It holds:
//
//   - DeviceState: the lifecycle of one device (live, lost, closed) and
//     the checks every backend call begins with, with the errors they
//     return (HostBufferState, HostRegistrationState, CheckOrdinal,
//     ClosedError), so each misuse is refused with the same message and
//     sentinel on every backend;
//   - Compose, Capabilities and Unwrap: the value a backend hands out for
//     a device, whose dynamic type offers exactly the optional
//     capabilities (driver.VMM, driver.Peer, ...) the device has;
//   - DSN, ParseDSN and ParseBytes: parsing a backend's "key=value,..."
//     configuration string, with errors that list the valid keys.
//
// A backend joins the registry in package driver (driver.RegisterBackend)
// and must pass driver/drivertest's conformance suite.
package backendkit
