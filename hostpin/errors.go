package hostpin

// Errors: the sentinels of every hostpin type. Driver failures are returned
// wrapped, so errors.Is(err, driver.ErrOutOfMemory) and the other driver
// sentinels work through them.

import (
	"errors"
	"fmt"

	"github.com/accelkit/accelkit/driver"
)

var (
	// ErrInvalidSize: a negative size, or one above the MaxSize option.
	// Alloc's error also matches driver.ErrInvalidValue.
	ErrInvalidSize = errors.New("hostpin: invalid size")
	// ErrDoubleFree: Free, or RecordStream, of a buffer already freed.
	ErrDoubleFree = errors.New("hostpin: buffer already freed")
	// ErrForeignBuffer: a buffer handed out by another Allocator or Direct.
	ErrForeignBuffer = errors.New("hostpin: buffer belongs to another allocator")
	// ErrNilBuffer: a nil *Buffer.
	ErrNilBuffer = errors.New("hostpin: nil buffer")
	// ErrClosed: Alloc after Close. It wraps driver.ErrClosed, so one
	// errors.Is(err, driver.ErrClosed) serves every accelkit module.
	ErrClosed = fmt.Errorf("hostpin: allocator closed: %w", driver.ErrClosed)
)
