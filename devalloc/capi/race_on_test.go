//go:build race

package main

// raceEnabled: the tests build the library with -race too, so the race
// detector watches the Go code under the harnesses' C threads.
const raceEnabled = true
