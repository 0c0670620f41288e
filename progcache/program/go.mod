module github.com/accelkit/accelkit/progcache/program

go 1.26.0

require (
	github.com/accelkit/accelkit/driver v0.1.0
	github.com/accelkit/accelkit/progcache v0.1.0
)

require (
	golang.org/x/crypto v0.55.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
