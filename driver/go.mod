module github.com/accelkit/accelkit/driver

go 1.26

require golang.org/x/sys v0.47.0
