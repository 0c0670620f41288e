module github.com/accelkit/accelkit/evpool

go 1.26

require github.com/accelkit/accelkit/driver v0.0.0

require golang.org/x/sys v0.47.0 // indirect

replace github.com/accelkit/accelkit/driver => ../driver
