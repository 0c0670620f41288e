module github.com/accelkit/accelkit/bench

go 1.26
