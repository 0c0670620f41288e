package driver

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
)

// Opener opens a backend configured by dsn (the backend's own "key=value,..."
// string; empty means defaults).
type Opener func(dsn string) (Driver, error)

// Prober reports whether the backend would open with dsn and find a device:
// nil if so, else an error that says why not (no library, no device, a dsn
// it does not take). It is cheap and leaves nothing open.
type Prober func(dsn string) error

// Backend is a backend as the registry knows it.
type Backend struct {
	// Name is the name Open takes; not empty or "auto". ACCELKIT_DRIVER
	// can name it when it has only letters, digits, '-' and '_'.
	Name string
	// Open opens the backend.
	Open Opener
	// Probe makes the backend a candidate of Open("auto", dsn). Without
	// one the backend is opened only by name.
	Probe Prober
	// Preference orders auto's candidates: higher first, ties by name.
	// Backends for real devices use PreferHardware, simulators
	// PreferSimulated, so a machine's GPU wins over the simulator.
	Preference int
}

// Preferences of the backends in this module, for Backend.Preference.
const (
	PreferSimulated = 0   // sim: always finds its device; the fallback
	PreferHardware  = 100 // cuda: a real device, when there is one
)

// EnvDriver names the environment variable that overrides the backend that
// OpenDefault and Open("auto", "") choose: "name" or "name:dsn".
const EnvDriver = "ACCELKIT_DRIVER"

// ErrUnknownBackend is Open of a name no backend registered, whether the
// name was Open's argument or came from ACCELKIT_DRIVER.
var ErrUnknownBackend = errors.New("driver: unknown backend")

// regMu guards registry; it is never held while a backend's Open or Probe
// runs.
var (
	regMu    sync.RWMutex
	registry = map[string]Backend{}
)

// Register makes a backend available under name, to be opened by name only
// (Open("auto") never chooses it; see RegisterBackend). It panics as
// RegisterBackend does.
func Register(name string, open Opener) {
	RegisterBackend(Backend{Name: name, Open: open})
}

// RegisterBackend makes b available under b.Name, and to Open("auto") when
// it has a Probe. It panics if the name is empty, reserved ("auto"),
// registered twice, or Open is nil, as database/sql.Register does: these
// are programming errors at init time.
func RegisterBackend(b Backend) {
	regMu.Lock()
	defer regMu.Unlock()
	switch {
	case b.Open == nil:
		panic("driver: Register opener is nil for " + b.Name)
	case b.Name == "" || b.Name == "auto":
		panic(fmt.Sprintf("driver: Register of reserved name %q", b.Name))
	}
	if _, dup := registry[b.Name]; dup {
		panic("driver: Register called twice for " + b.Name)
	}
	registry[b.Name] = b
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
// name "auto" first honours ACCELKIT_DRIVER=name[:dsn]. Without it, it
// asks the backends registered with a probe, most preferred first (see
// Backend.Preference), and opens the first whose probe accepts dsn and
// whose driver has a device; dsn goes to that backend. With cuda and sim
// registered that is CUDA when a device is there, else sim. When none
// opens, the error wraps ErrNoDevice and each backend's own error.
func Open(name, dsn string) (Driver, error) {
	if name == "auto" {
		if spec, ok := os.LookupEnv(EnvDriver); ok && spec != "" {
			n, d, err := ParseSpec(spec)
			if err != nil {
				return nil, fmt.Errorf("driver: %s: %w", EnvDriver, err)
			}
			if n != "auto" {
				if !registered(n) {
					return nil, unknownBackend(n, fmt.Sprintf(" in %s=%q", EnvDriver, spec))
				}
				return Open(n, d)
			}
			dsn = d
		}
		return openAuto(dsn)
	}
	regMu.RLock()
	b, ok := registry[name]
	regMu.RUnlock()
	if !ok {
		return nil, unknownBackend(name, "")
	}
	return b.Open(dsn)
}

func registered(name string) bool {
	regMu.RLock()
	defer regMu.RUnlock()
	_, ok := registry[name]
	return ok
}

// unknownBackend is the error for a name no backend registered; where says
// where the name came from when not from Open's argument. The hint is for
// the program's author: a backend joins by blank import.
func unknownBackend(name, where string) error {
	return fmt.Errorf("%w %q%s (registered: %s; a program adds a backend by importing its package, e.g. _ \"github.com/accelkit/accelkit/driver/%s\")",
		ErrUnknownBackend, name, where, strings.Join(append(Drivers(), "auto"), ", "), name)
}

// OpenDefault is Open("auto", ""): ACCELKIT_DRIVER if set, else the most
// preferred backend that finds a device (CUDA when a device is there, else
// sim).
func OpenDefault() (Driver, error) { return Open("auto", "") }

// openAuto opens the first candidate, by preference, whose probe accepts
// dsn and whose driver has a device. A candidate that probes well but then
// fails to open, or opens without a device, is closed and passed over too,
// so auto ends on a driver that works or on an error naming every reason.
func openAuto(dsn string) (Driver, error) {
	regMu.RLock()
	var cands []Backend
	var byName []string // registered without a probe: never chosen
	for _, b := range registry {
		if b.Probe != nil {
			cands = append(cands, b)
		} else {
			byName = append(byName, b.Name)
		}
	}
	regMu.RUnlock()
	slices.SortFunc(cands, func(a, b Backend) int {
		if a.Preference != b.Preference {
			return cmp.Compare(b.Preference, a.Preference)
		}
		return strings.Compare(a.Name, b.Name)
	})
	slices.Sort(byName)
	var why []any
	for _, b := range cands {
		drv, err := tryOpen(b, dsn)
		if err == nil {
			return drv, nil
		}
		why = append(why, fmt.Errorf("%s: %w", b.Name, err))
	}
	note := ""
	if len(byName) > 0 {
		note = fmt.Sprintf(" (%s: registered without a probe, opened only by name)", strings.Join(byName, ", "))
	}
	if len(cands) == 0 {
		return nil, fmt.Errorf("%w: auto has no backend to probe%s; import one, e.g. _ \"github.com/accelkit/accelkit/driver/sim\"", ErrNoDevice, note)
	}
	format := "%w: auto opened no backend" + note + ": " + strings.TrimSuffix(strings.Repeat("%w; ", len(why)), "; ")
	return nil, fmt.Errorf(format, append([]any{ErrNoDevice}, why...)...)
}

// tryOpen probes b with dsn and, when the probe finds a device, opens it.
func tryOpen(b Backend, dsn string) (Driver, error) {
	if err := b.Probe(dsn); err != nil {
		return nil, fmt.Errorf("probe: %w", err)
	}
	drv, err := b.Open(dsn)
	if err != nil {
		return nil, fmt.Errorf("probe found a device, then open failed: %w", err)
	}
	if drv.DeviceCount() > 0 {
		return drv, nil
	}
	return nil, errors.Join(fmt.Errorf("probe found a device, then the opened driver had none: %w", ErrNoDevice), drv.Close())
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
