package backendkit

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/accelkit/accelkit/driver"
)

// DSN is a parsed backend configuration string "key=value,key=value".
type DSN map[string]string

// ParseDSN parses dsn for backend, accepting only the keys in valid. An
// unknown key, a duplicate key, or an entry without '=' is an error wrapping
// driver.ErrInvalidValue that lists the valid keys.
func ParseDSN(backend, dsn string, valid []string) (DSN, error) {
	out := DSN{}
	if strings.TrimSpace(dsn) == "" {
		return out, nil
	}
	for i, part := range strings.Split(dsn, ",") {
		k, v, ok := strings.Cut(part, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch {
		case !ok || k == "":
			return nil, fmt.Errorf("%s dsn %q: entry %d %q is not key=value (valid keys: %s): %w",
				backend, dsn, i+1, part, strings.Join(valid, ", "), driver.ErrInvalidValue)
		case !slices.Contains(valid, k):
			return nil, fmt.Errorf("%s dsn: unknown key %q (valid keys: %s): %w",
				backend, k, strings.Join(valid, ", "), driver.ErrInvalidValue)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("%s dsn: key %q given twice: %w", backend, k, driver.ErrInvalidValue)
		}
		out[k] = v
	}
	return out, nil
}

// Int returns the value of key as an int in [lo, hi], or def when absent.
func (d DSN) Int(key string, def, lo, hi int) (int, error) {
	s, ok := d[key]
	if !ok {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("dsn key %s=%q: want an integer in [%d, %d]: %w", key, s, lo, hi, driver.ErrInvalidValue)
	}
	return n, nil
}

// Bool returns the value of key as a bool (true/false/1/0), or def when absent.
func (d DSN) Bool(key string, def bool) (bool, error) {
	s, ok := d[key]
	if !ok {
		return def, nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, fmt.Errorf("dsn key %s=%q: want true or false: %w", key, s, driver.ErrInvalidValue)
	}
	return b, nil
}

// Bytes returns the value of key as a byte count (see ParseBytes), or def
// when absent.
func (d DSN) Bytes(key string, def uint64) (uint64, error) {
	s, ok := d[key]
	if !ok {
		return def, nil
	}
	n, err := ParseBytes(s)
	if err != nil {
		return 0, fmt.Errorf("dsn key %s: %w", key, err)
	}
	return n, nil
}

// Float returns the value of key as a float in [lo, hi], or def when absent.
func (d DSN) Float(key string, def, lo, hi float64) (float64, error) {
	s, ok := d[key]
	if !ok {
		return def, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || f < lo || f > hi {
		return 0, fmt.Errorf("dsn key %s=%q: want a number in [%g, %g]: %w", key, s, lo, hi, driver.ErrInvalidValue)
	}
	return f, nil
}

var byteUnits = []struct {
	suffix string
	mult   uint64
}{
	{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10},
	{"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"kB", 1e3},
	{"B", 1},
}

// ParseBytes parses a byte count: a non-negative integer with an optional
// unit B, KiB, MiB, GiB, TiB (powers of 1024) or KB, MB, GB, TB (powers of
// 1000), such as "8GiB" or "512MiB".
func ParseBytes(s string) (uint64, error) {
	t := strings.TrimSpace(s)
	mult := uint64(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseUint(t, 10, 64)
	if err != nil || (n != 0 && n > math.MaxUint64/mult) {
		return 0, fmt.Errorf("byte size %q: want an integer with an optional unit B, KiB, MiB, GiB, TiB, KB, MB, GB or TB: %w", s, driver.ErrInvalidValue)
	}
	return n * mult, nil
}
