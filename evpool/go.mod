module github.com/accelkit/accelkit/evpool

go 1.26
