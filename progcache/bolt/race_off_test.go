//go:build !race

package bolt

// raceEnabled reports whether the tests run under the race detector, which
// makes single-goroutine sweeps several times slower without finding more.
const raceEnabled = false
