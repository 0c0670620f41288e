module github.com/accelkit/accelkit/progcache

go 1.26

require (
	github.com/google/renameio/v2 v2.0.2
	go.etcd.io/bbolt v1.5.0
	golang.org/x/crypto v0.55.0
)

require golang.org/x/sys v0.47.0 // indirect
