module github.com/accelkit/accelkit/devalloc/capi

go 1.26.0

require (
	github.com/accelkit/accelkit/atomicfile v0.1.0
	github.com/accelkit/accelkit/devalloc v0.1.0
	github.com/accelkit/accelkit/driver v0.1.0
)

require (
	github.com/accelkit/accelkit/evpool v0.1.0 // indirect
	github.com/google/renameio/v2 v2.0.2 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
