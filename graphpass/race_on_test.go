//go:build race

package graphpass

// raceEnabled reports whether the tests run under the race detector, which
// makes large single-goroutine decodes several times slower without
// finding more.
const raceEnabled = true
