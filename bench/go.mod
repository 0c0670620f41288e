module github.com/accelkit/accelkit/bench

go 1.26.0

require (
	github.com/accelkit/accelkit/atomicfile v0.1.0
	github.com/accelkit/accelkit/devalloc v0.1.0
	github.com/accelkit/accelkit/driver v0.1.0
	github.com/accelkit/accelkit/graphpass v0.1.0
	github.com/accelkit/accelkit/hostpin v0.1.0
	github.com/accelkit/accelkit/progcache v0.1.0
	github.com/accelkit/accelkit/progcache/program v0.1.0
	github.com/accelkit/accelkit/progcache/redistier v0.1.0
	github.com/accelkit/accelkit/wrlru v0.1.0
	github.com/hashicorp/golang-lru/v2 v2.0.7
	github.com/redis/go-redis/v9 v9.23.0
)

require (
	github.com/accelkit/accelkit/evpool v0.1.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/google/renameio/v2 v2.0.2 // indirect
	go.etcd.io/bbolt v1.5.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/crypto v0.55.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
