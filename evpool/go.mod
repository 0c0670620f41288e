module github.com/accelkit/accelkit/evpool

go 1.26.0

require github.com/accelkit/accelkit/driver v0.1.0

require golang.org/x/sys v0.49.0 // indirect
