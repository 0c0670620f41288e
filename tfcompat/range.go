package tfcompat

import (
	"errors"
	"fmt"
)

// ErrUnsupported is returned (wrapped) by Check for a TensorFlow version
// outside the supported range.
var ErrUnsupported = errors.New("tfcompat: unsupported tensorflow version")

// Range is a half-open version range Min <= v < Max judged by PEP 440 with
// pre-releases allowed: v is inside when it sorts inside, except that the
// pre-releases and development releases of Max itself are outside (PEP 440:
// "<V" must not allow a pre-release of V unless V is one), so < 2.17 excludes
// 2.17.0rc1 and 2.17.0.dev20240101 although they sort below 2.17. Local
// versions such as 2.16.1+nv24.01 that sort inside are inside. A Range is a
// value and safe for concurrent use.
type Range struct {
	Min Version // inclusive
	Max Version // exclusive
}

// Contains reports whether v lies in r.
func (r Range) Contains(v Version) bool {
	if Compare(v, r.Min) < 0 || Compare(v, r.Max) >= 0 {
		return false
	}
	if !r.Max.IsPreRelease() && v.IsPreRelease() && compareRelease(v.Release, r.Max.Release) == 0 {
		return false
	}
	return true
}

// String renders r in PEP 440 specifier syntax, e.g. ">=2.6, <2.17".
func (r Range) String() string { return ">=" + r.Min.String() + ", <" + r.Max.String() }

// Supported is the range of TensorFlow releases accelkit supports.
var Supported = Range{Min: MustParseVersion("2.6"), Max: MustParseVersion("2.17")}

// Recommended is the TensorFlow release accelkit recommends.
var Recommended = MustParseVersion("2.6.1")

// Check returns nil when v is inside Supported, or an error wrapping
// ErrUnsupported that names v, the range and the recommended version.
func Check(v Version) error {
	if Supported.Contains(v) {
		return nil
	}
	return fmt.Errorf("%w: tensorflow %s is outside the supported range %s; install tensorflow==%s (recommended) or another release in the range",
		ErrUnsupported, v, Supported, Recommended)
}

// CheckString parses s and checks it; parse errors wrap ErrInvalidVersion.
func CheckString(s string) error {
	v, err := ParseVersion(s)
	if err != nil {
		return err
	}
	return Check(v)
}
