module github.com/accelkit/accelkit/atomicfile

go 1.26

require github.com/google/renameio/v2 v2.0.2
