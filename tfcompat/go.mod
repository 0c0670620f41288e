module github.com/accelkit/accelkit/tfcompat

go 1.26
