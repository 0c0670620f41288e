module github.com/accelkit/accelkit/devalloc

go 1.26
