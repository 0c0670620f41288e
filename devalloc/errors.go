package devalloc

// Errors: the sentinels and error values of the allocator (the OOM report
// is OOMError, in oom.go).

import (
	"errors"
	"fmt"

	"github.com/accelkit/accelkit/driver"
)

// ErrClosed is returned by Alloc after Close; it wraps driver.ErrClosed.
var ErrClosed = fmt.Errorf("devalloc: allocator closed: %w", driver.ErrClosed)

// errLimit is the cause of an OOM when the allocator's own limit, not the
// device, refused memory.
var errLimit = errors.New("allocator memory limit reached (SetLimit or SetMemoryFraction)")
