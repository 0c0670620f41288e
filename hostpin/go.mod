module github.com/accelkit/accelkit/hostpin

go 1.26
