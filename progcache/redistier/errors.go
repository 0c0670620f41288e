package redistier

import (
	"errors"
	"fmt"
)

// Sentinel errors, matched with errors.Is. Besides these, the cache uses
// progcache's: ErrTooLarge (an entry over MaxEntryBytes or MaxBytes),
// ErrInvalidConfig (bad Options) and ErrClosed (use after Close, which
// errors.Is also matches with driver.ErrClosed).
var (
	// ErrUnavailable reports a Redis call that failed: the server could
	// not be reached, did not answer within Options.Timeout, answered
	// with an error, or the circuit breaker refused the call. The error
	// that wraps it also wraps the cause. Get and View never return it
	// (a failed lookup is a miss); Put, Delete, Len, Clear, Prefetch,
	// Acquire and Release do.
	ErrUnavailable = errors.New("redistier: redis unavailable")
	// ErrBreakerOpen reports a call refused by the open circuit breaker,
	// without reaching Redis. It wraps ErrUnavailable.
	ErrBreakerOpen = fmt.Errorf("redistier: circuit breaker open: %w", ErrUnavailable)
)
