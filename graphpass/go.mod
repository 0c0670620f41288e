module github.com/accelkit/accelkit/graphpass

go 1.26
