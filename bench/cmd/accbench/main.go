// Command accbench runs accelkit's benchmark suites on the default driver
// (CUDA when present, else the sim device), side by side with the baselines
// each module replaces, prints a summary table, and writes
// accbench-out/results.json and accbench-out/report.html.
//
//	go run ./bench/cmd/accbench                  # every suite, a few minutes on 2 cores
//	go run ./bench/cmd/accbench -quick           # seconds: CI smoke
//	go run ./bench/cmd/accbench -suite devalloc,replay -count 5
//	./accbench -driver cuda -peers /opt/torch/.venv/bin/python   # on a GPU machine
//
// Run with -h for every flag.
package main

import (
	"os"

	"github.com/accelkit/accelkit/bench/accbench"
	_ "github.com/accelkit/accelkit/driver/cuda"
	_ "github.com/accelkit/accelkit/driver/sim"
)

func main() {
	os.Exit(accbench.Main(os.Args[1:], os.Stdout, os.Stderr, accbench.Extra{}))
}
