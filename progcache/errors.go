package progcache

import (
	"errors"
)

// Sentinel errors. Functions wrap them with %w and a message that says what
// was wrong and what is valid; test with errors.Is. Their text carries no
// "progcache:" prefix: the message that wraps one begins with it, so it
// appears once.
var (
	// ErrInvalidInput reports a malformed KeyInput or Options.
	ErrInvalidInput = errors.New("invalid input")
	// ErrNeedsExtraDigest reports options that pull in inputs the key cannot
	// see (include and system include paths, pre-includes, precompiled
	// headers, options files, a libdevice directory, include options inside
	// -Xcompiler, a source name with a directory part) given without
	// KeyInput.ExtraDigest.
	ErrNeedsExtraDigest = errors.New("extra digest required")
	// ErrUncacheable reports options whose effect is a side output or side
	// effect that a cache hit would skip (PCH creation, timing or trace
	// files, kept intermediates, dependency files, -run).
	ErrUncacheable = errors.New("uncacheable options")
	// ErrInvalidKey reports a string that is not a key.
	ErrInvalidKey = errors.New("invalid key")
	// ErrCorrupt reports an entry record that failed its checksum, MAC or
	// structure checks, or a damaged bolt file. Caches turn a corrupt entry
	// into a miss and remove it; it surfaces from DecodeRecord, from
	// verification, and from a bolt file that is damaged but may not be set
	// aside (read-only, or opened through a symbolic link).
	ErrCorrupt = errors.New("corrupt entry")
	// ErrUnreadable reports an entry record written by a differently
	// configured process: another record version, check kind or MAC key.
	// Caches treat it as a miss counted in Stats.Unreadable and leave the
	// entry in place, since a peer configured like its writer can still
	// read it; verification never removes it.
	ErrUnreadable = errors.New("entry unreadable with this configuration")
	// ErrTooLarge reports an object larger than the cache's byte cap; it is
	// not stored and evicts nothing.
	ErrTooLarge = errors.New("object larger than the cache's byte cap")
	// ErrInvalidConfig reports a bad backend configuration (e.g. a negative
	// cap).
	ErrInvalidConfig = errors.New("invalid configuration")
	// ErrClosed reports use of a closed cache. errors.Is(err,
	// driver.ErrClosed) matches it too, as it does every accelkit module's
	// ErrClosed, without progcache importing driver: see closedError.
	ErrClosed error = closedError{}
	// ErrReadOnly reports a change asked of a cache opened read-only
	// (filestream.Options.ReadOnly, bolt.Options.ReadOnly), which never
	// changes anything on disk.
	ErrReadOnly = errors.New("cache opened read-only")
	// ErrNotCache reports a path that holds something other than a
	// progcache cache (a foreign file or directory, a symbolic link where
	// the cache keeps a directory, a device). It is left untouched.
	ErrNotCache = errors.New("not a progcache cache")
)

// closedError is ErrClosed's type. progcache stands without the driver
// module (a compile service has no device), so it cannot wrap
// driver.ErrClosed; instead its Is method accepts any target that carries the
// AccelkitClosed mark, which driver.ErrClosed does. The mark is a method
// rather than a shared value so that neither module imports the other.
type closedError struct{}

func (closedError) Error() string { return "cache closed" }

// Is reports whether target is accelkit's closed sentinel
// (driver.ErrClosed), so errors.Is(err, driver.ErrClosed) holds for a closed
// cache's errors. errors.Is(err, ErrClosed) matches by == before Is is asked.
func (closedError) Is(target error) bool {
	_, ok := target.(interface{ AccelkitClosed() })
	return ok
}
