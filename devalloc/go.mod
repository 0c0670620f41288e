module github.com/accelkit/accelkit/devalloc

go 1.26

require (
	github.com/accelkit/accelkit/driver v0.0.0
	github.com/accelkit/accelkit/evpool v0.0.0
	github.com/google/renameio/v2 v2.0.2
)

require golang.org/x/sys v0.47.0 // indirect

replace (
	github.com/accelkit/accelkit/driver => ../driver
	github.com/accelkit/accelkit/evpool => ../evpool
)
