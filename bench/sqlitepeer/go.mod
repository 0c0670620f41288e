module github.com/accelkit/accelkit/bench/sqlitepeer

go 1.26.0

require (
	github.com/accelkit/accelkit/bench v0.1.0
	github.com/accelkit/accelkit/driver v0.1.0
	github.com/accelkit/accelkit/progcache v0.1.0
	modernc.org/sqlite v1.61.1
)

require google.golang.org/protobuf v1.36.12 // indirect

require (
	github.com/accelkit/accelkit/atomicfile v0.1.0 // indirect
	github.com/accelkit/accelkit/devalloc v0.1.0 // indirect
	github.com/accelkit/accelkit/evpool v0.1.0 // indirect
	github.com/accelkit/accelkit/graphpass v0.1.0 // indirect
	github.com/accelkit/accelkit/hostpin v0.1.0 // indirect
	github.com/accelkit/accelkit/progcache/redistier v0.1.0 // indirect
	github.com/accelkit/accelkit/wrlru v0.1.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dustin/go-humanize v1.1.0 // indirect
	github.com/google/renameio/v2 v2.0.2 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/hashicorp/golang-lru/v2 v2.0.7 // indirect
	github.com/mattn/go-isatty v0.0.24 // indirect
	github.com/ncruces/go-strftime v1.1.0 // indirect
	github.com/redis/go-redis/v9 v9.23.0 // indirect
	github.com/remyoudompheng/bigfft v0.0.0-20230129092748-24d4a6f8daec // indirect
	go.etcd.io/bbolt v1.5.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/crypto v0.55.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	modernc.org/libc v1.79.0 // indirect
	modernc.org/mathutil v1.7.1 // indirect
	modernc.org/memory v1.12.1 // indirect
)
