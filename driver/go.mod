module github.com/accelkit/accelkit/driver

go 1.26
