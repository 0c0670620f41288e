module github.com/accelkit/accelkit/hostpin

go 1.26.0

require (
	github.com/accelkit/accelkit/driver v0.1.0
	github.com/accelkit/accelkit/evpool v0.1.0
)

require golang.org/x/sys v0.49.0 // indirect
