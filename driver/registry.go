package driver

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
)

// Opener opens a backend configured by dsn (the backend's own "key=value,..."
// string; empty means defaults).
type Opener func(dsn string) (Driver, error)

// EnvDriver names the environment variable that overrides the backend that
// OpenDefault and Open("auto", "") choose: "name" or "name:dsn".
const EnvDriver = "ACCELKIT_DRIVER"

var (
	regMu    sync.RWMutex
	registry = map[string]Opener{}
)

// Register makes a backend available under name. It panics if name is
// empty, reserved ("auto"), registered twice, or open is nil, as
// database/sql.Register does: these are programming errors at init time.
func Register(name string, open Opener) {
	regMu.Lock()
	defer regMu.Unlock()
	switch {
	case open == nil:
		panic("driver: Register opener is nil for " + name)
	case name == "" || name == "auto":
		panic(fmt.Sprintf("driver: Register of reserved name %q", name))
	}
	if _, dup := registry[name]; dup {
		panic("driver: Register called twice for " + name)
	}
	registry[name] = open
}

// Drivers returns the sorted names of the registered backends.
func Drivers() []string {
	regMu.RLock()
	defer regMu.RUnlock()
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Open opens the backend registered under name with dsn.
//
// name "auto" first honours ACCELKIT_DRIVER=name[:dsn]; without it, it opens
// "cuda" when that backend is registered and finds a device, else "sim" with
// dsn.
func Open(name, dsn string) (Driver, error) {
	if name == "auto" {
		if spec, ok := os.LookupEnv(EnvDriver); ok && spec != "" {
			n, d, err := ParseSpec(spec)
			if err != nil {
				return nil, fmt.Errorf("driver: %s: %w", EnvDriver, err)
			}
			if n != "auto" {
				return Open(n, d)
			}
			dsn = d
		}
		return openAuto(dsn)
	}
	regMu.RLock()
	open, ok := registry[name]
	regMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("driver: unknown backend %q (registered: %s; import its package, e.g. _ \"github.com/accelkit/accelkit/driver/%s\")",
			name, strings.Join(append(Drivers(), "auto"), ", "), name)
	}
	return open(dsn)
}

// OpenDefault is Open("auto", ""): ACCELKIT_DRIVER if set, else CUDA when a
// device is there, else sim.
func OpenDefault() (Driver, error) { return Open("auto", "") }

func openAuto(dsn string) (Driver, error) {
	regMu.RLock()
	cuda, haveCUDA := registry["cuda"]
	sim, haveSim := registry["sim"]
	regMu.RUnlock()
	var cudaErr error
	if haveCUDA {
		d, err := cuda("")
		if err == nil && d.DeviceCount() > 0 {
			return d, nil
		}
		if err == nil {
			d.Close()
			err = ErrNoDevice
		}
		cudaErr = err
	}
	if haveSim {
		return sim(dsn)
	}
	if cudaErr != nil {
		return nil, fmt.Errorf("driver: auto: cuda unavailable (%w) and sim not registered (import _ \"github.com/accelkit/accelkit/driver/sim\")", cudaErr)
	}
	return nil, fmt.Errorf("driver: auto: no backend registered (import _ \"github.com/accelkit/accelkit/driver/sim\"): %w", ErrNoDevice)
}

// ParseSpec splits an ACCELKIT_DRIVER value "name" or "name:dsn". The name
// is letters, digits, '-' and '_'.
func ParseSpec(spec string) (name, dsn string, err error) {
	name, dsn, _ = strings.Cut(strings.TrimSpace(spec), ":")
	if name == "" {
		return "", "", fmt.Errorf("driver spec %q: empty backend name; want name[:dsn], e.g. sim:devices=2 or cuda", spec)
	}
	for _, r := range name {
		if !isNameRune(r) {
			return "", "", fmt.Errorf("driver spec %q: backend name %q has %q; want letters, digits, '-' or '_' before the ':'", spec, name, r)
		}
	}
	return name, dsn, nil
}

// isNameRune reports whether r may appear in a backend name: an ASCII
// letter or digit, '-' or '_'.
func isNameRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_'
}
