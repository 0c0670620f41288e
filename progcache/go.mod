module github.com/accelkit/accelkit/progcache

go 1.26.0

require (
	go.etcd.io/bbolt v1.5.0
	golang.org/x/crypto v0.55.0
)

require golang.org/x/sys v0.49.0
