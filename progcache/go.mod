module github.com/accelkit/accelkit/progcache

go 1.26
