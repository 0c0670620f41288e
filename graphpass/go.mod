module github.com/accelkit/accelkit/graphpass

go 1.26

require (
	github.com/accelkit/accelkit/atomicfile v0.1.0
	google.golang.org/protobuf v1.36.12
)

require github.com/google/renameio/v2 v2.0.2 // indirect
