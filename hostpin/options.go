package hostpin

// Options of the caching Allocator (Options) and of the uncached Direct
// (DirectOptions): the fields, their defaults, and the validation New and
// NewDirect run. The zero value of every field means its default; a value
// out of range is an error that names the field, the value and what is
// valid. StagerOptions live with the Stager (stager.go).

import (
	"fmt"

	"github.com/accelkit/accelkit/driver"
)

const (
	// defaultCacheCap bounds idle cached bytes: enough for a few 256 MiB
	// staging buffers and the chunks of many concurrent copies, small beside
	// the host RAM of an accelerator machine.
	defaultCacheCap = 2 << 30

	// defaultPageOnlyThreshold is where class rounding stops: a class step
	// above 64 MiB is 16 MiB or more of pinned RAM, so larger requests round
	// to the page only.
	defaultPageOnlyThreshold = 64 << 20

	// defaultMaxSize is the largest request accepted: 1 TiB is beyond the
	// pinnable RAM of any host, so anything larger is a caller's bug (such
	// as a negative length converted to int) and is refused before the
	// driver sees it.
	defaultMaxSize = 1 << 40
)

// Options configures an Allocator. The zero value gives the defaults.
type Options struct {
	// ClassesPerDoubling is the number of size classes per power of two:
	// 1, 2, 4, 8 or 16 (0 means 4, keeping handed-out sizes within 1.25x).
	ClassesPerDoubling int
	// CacheCap bounds the idle bytes kept cached; beyond it idle buffers go
	// back to the driver oldest first. 0 means 2 GiB; negative is an error.
	CacheCap int64
	// PageOnlyThreshold: requests above it round to the host page instead of
	// a class. 0 means 64 MiB; negative is an error.
	PageOnlyThreshold int
	// MaxSize is the largest request accepted. 0 means 1 TiB; negative is an
	// error.
	MaxSize int
}

// withDefaults returns o with every zero field set to its default, or an
// error naming the first field out of range.
func (o Options) withDefaults() (Options, error) {
	switch d := o.ClassesPerDoubling; {
	case d == 0:
		o.ClassesPerDoubling = defaultPerDoubling
	case d < 0 || d > maxPerDoubling || d&(d-1) != 0:
		return o, fmt.Errorf("hostpin: Options.ClassesPerDoubling %d: want 1, 2, 4, 8 or 16 (0 for 4): %w", d, driver.ErrInvalidValue)
	}
	switch {
	case o.CacheCap == 0:
		o.CacheCap = defaultCacheCap
	case o.CacheCap < 0:
		return o, fmt.Errorf("hostpin: Options.CacheCap %d: want >= 0 bytes (0 for 2 GiB): %w", o.CacheCap, driver.ErrInvalidValue)
	}
	switch {
	case o.PageOnlyThreshold == 0:
		o.PageOnlyThreshold = defaultPageOnlyThreshold
	case o.PageOnlyThreshold < 0:
		return o, fmt.Errorf("hostpin: Options.PageOnlyThreshold %d: want >= 0 bytes (0 for 64 MiB): %w", o.PageOnlyThreshold, driver.ErrInvalidValue)
	}
	var err error
	o.MaxSize, err = maxSizeOrDefault("Options", o.MaxSize)
	return o, err
}

// DirectOptions configures a Direct. The zero value gives the defaults.
type DirectOptions struct {
	// MaxSize is the largest request accepted. 0 means 1 TiB; negative is an
	// error.
	MaxSize int
}

// withDefaults returns o with every zero field set to its default, or an
// error naming the field out of range.
func (o DirectOptions) withDefaults() (DirectOptions, error) {
	var err error
	o.MaxSize, err = maxSizeOrDefault("DirectOptions", o.MaxSize)
	return o, err
}

// maxSizeOrDefault validates the MaxSize field of the options struct named
// by in.
func maxSizeOrDefault(in string, n int) (int, error) {
	switch {
	case n == 0:
		return defaultMaxSize, nil
	case n < 0:
		return 0, fmt.Errorf("hostpin: %s.MaxSize %d: want >= 0 bytes (0 for 1 TiB): %w", in, n, driver.ErrInvalidValue)
	}
	return n, nil
}
