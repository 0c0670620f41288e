package driver

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// fakeDriver is a Driver with a fixed device count, for registry tests.
type fakeDriver struct {
	name, dsn string
	devices   int
	closed    *bool
}

func (f *fakeDriver) Name() string               { return f.name }
func (f *fakeDriver) Version() string            { return f.name + " test" }
func (f *fakeDriver) DeviceCount() int           { return f.devices }
func (f *fakeDriver) Device(int) (Device, error) { return nil, ErrNoDevice }
func (f *fakeDriver) Close() error {
	if f.closed != nil {
		*f.closed = true
	}
	return nil
}

// withRegistry runs the test against a registry holding only backends;
// the real registry is restored afterwards.
func withRegistry(t *testing.T, backends map[string]Opener) {
	t.Helper()
	regMu.Lock()
	saved := registry
	registry = map[string]Opener{}
	for n, o := range backends {
		registry[n] = o
	}
	regMu.Unlock()
	t.Cleanup(func() {
		regMu.Lock()
		registry = saved
		regMu.Unlock()
	})
}

func fake(name string, devices int, closed *bool) Opener {
	return func(dsn string) (Driver, error) {
		return &fakeDriver{name: name, dsn: dsn, devices: devices, closed: closed}, nil
	}
}

func failing(err error) Opener { return func(string) (Driver, error) { return nil, err } }

func TestRegister(t *testing.T) {
	withRegistry(t, nil)
	Register("b", fake("b", 1, nil))
	Register("a", fake("a", 1, nil))
	if got := Drivers(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("Drivers() = %v, want [a b]", got)
	}
	for _, tt := range []struct {
		name string
		open Opener
		want string
	}{
		{"a", fake("a", 1, nil), "twice"},
		{"", fake("", 1, nil), "reserved"},
		{"auto", fake("auto", 1, nil), "reserved"},
		{"c", nil, "nil"},
	} {
		func() {
			defer func() {
				r := recover()
				if s, _ := r.(string); !strings.Contains(s, tt.want) {
					t.Errorf("Register(%q) panic = %v, want one mentioning %q", tt.name, r, tt.want)
				}
			}()
			Register(tt.name, tt.open)
		}()
	}
}

func TestOpen(t *testing.T) {
	errNoLib := errors.New("no libcuda")
	tests := []struct {
		name     string
		backends map[string]Opener
		env      string // ACCELKIT_DRIVER; "" leaves it unset
		open     string
		dsn      string
		want     string // backend name chosen
		wantDSN  string
		wantErr  error
		errText  string
	}{
		{name: "named", backends: map[string]Opener{"sim": fake("sim", 1, nil)}, open: "sim", dsn: "devices=2", want: "sim", wantDSN: "devices=2"},
		{name: "unknown", backends: map[string]Opener{"sim": fake("sim", 1, nil)}, open: "tpu", errText: `unknown backend "tpu" (registered: sim, auto`},
		{name: "auto prefers cuda with a device", backends: map[string]Opener{"sim": fake("sim", 1, nil), "cuda": fake("cuda", 1, nil)}, open: "auto", want: "cuda"},
		{name: "auto falls back to sim without a cuda device", backends: map[string]Opener{"sim": fake("sim", 1, nil), "cuda": fake("cuda", 0, nil)}, open: "auto", dsn: "devices=3", want: "sim", wantDSN: "devices=3"},
		{name: "auto falls back to sim when cuda fails", backends: map[string]Opener{"sim": fake("sim", 1, nil), "cuda": failing(errNoLib)}, open: "auto", want: "sim"},
		{name: "auto without sim reports cuda's failure", backends: map[string]Opener{"cuda": failing(errNoLib)}, open: "auto", wantErr: errNoLib, errText: "sim not registered"},
		{name: "auto with nothing registered", open: "auto", wantErr: ErrNoDevice},
		{name: "env names a backend", backends: map[string]Opener{"sim": fake("sim", 1, nil), "cuda": fake("cuda", 1, nil)}, env: "sim:devices=2", open: "auto", want: "sim", wantDSN: "devices=2"},
		{name: "env auto with a dsn", backends: map[string]Opener{"sim": fake("sim", 1, nil)}, env: "auto:capacity=1GiB", open: "auto", want: "sim", wantDSN: "capacity=1GiB"},
		{name: "env is ignored by a named Open", backends: map[string]Opener{"sim": fake("sim", 1, nil), "cuda": fake("cuda", 1, nil)}, env: "sim", open: "cuda", want: "cuda"},
		{name: "env with a bad name", backends: map[string]Opener{"sim": fake("sim", 1, nil)}, env: "si m:x", open: "auto", errText: EnvDriver},
		{name: "env names an unregistered backend", backends: map[string]Opener{"sim": fake("sim", 1, nil)}, env: "cuda", open: "auto", errText: `unknown backend "cuda"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			withRegistry(t, tt.backends)
			t.Setenv(EnvDriver, tt.env)
			drv, err := Open(tt.open, tt.dsn)
			if tt.wantErr != nil || tt.errText != "" {
				if err == nil {
					t.Fatalf("Open(%q) = %v, want an error", tt.open, drv.Name())
				}
				if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
					t.Errorf("error %v does not wrap %v", err, tt.wantErr)
				}
				if !strings.Contains(err.Error(), tt.errText) {
					t.Errorf("error %q does not mention %q", err, tt.errText)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			f := drv.(*fakeDriver)
			if f.name != tt.want || f.dsn != tt.wantDSN {
				t.Errorf("Open(%q, %q) opened %s with dsn %q; want %s with %q", tt.open, tt.dsn, f.name, f.dsn, tt.want, tt.wantDSN)
			}
		})
	}
}

func TestOpenAutoClosesDevicelessCUDA(t *testing.T) {
	var closed bool
	withRegistry(t, map[string]Opener{"sim": fake("sim", 1, nil), "cuda": fake("cuda", 0, &closed)})
	t.Setenv(EnvDriver, "")
	if _, err := OpenDefault(); err != nil {
		t.Fatal(err)
	}
	if !closed {
		t.Error("auto left a cuda driver without devices open")
	}
}

func TestParseSpec(t *testing.T) {
	tests := []struct {
		spec, name, dsn string
		ok              bool
	}{
		{"sim", "sim", "", true},
		{"sim:devices=2,capacity=8GiB", "sim", "devices=2,capacity=8GiB", true},
		{" cuda ", "cuda", "", true},
		{"my-backend_2:a=b:c", "my-backend_2", "a=b:c", true},
		{"sim:", "sim", "", true},
		{"", "", "", false},
		{":devices=2", "", "", false},
		{"si m", "", "", false},
		{"sim/x:y", "", "", false},
		{"simé", "", "", false},
	}
	for _, tt := range tests {
		name, dsn, err := ParseSpec(tt.spec)
		if tt.ok != (err == nil) || name != tt.name || dsn != tt.dsn {
			t.Errorf("ParseSpec(%q) = %q, %q, %v; want %q, %q, ok=%v", tt.spec, name, dsn, err, tt.name, tt.dsn, tt.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "want") {
			t.Errorf("ParseSpec(%q) error %q does not say what is valid", tt.spec, err)
		}
	}
}

// FuzzParseSpec checks ACCELKIT_DRIVER parsing: no panics, a valid name
// whenever it succeeds, and name[:dsn] reproduces the trimmed input.
// nameRunes are the runes a backend name may hold, spelled out so the fuzz
// oracle does not share ParseSpec's range test.
const nameRunes = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_"

func FuzzParseSpec(f *testing.F) {
	for _, s := range []string{"sim", "cuda", "sim:devices=2,capacity=8GiB", "auto:vmm=false", " sim ", "", ":", "si m:x", "a:b:c", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		name, dsn, err := ParseSpec(spec)
		if err != nil {
			if name != "" || dsn != "" {
				t.Fatalf("ParseSpec(%q) failed but returned %q, %q", spec, name, dsn)
			}
			return
		}
		if name == "" {
			t.Fatalf("ParseSpec(%q) accepted an empty name", spec)
		}
		for _, r := range name {
			if !strings.ContainsRune(nameRunes, r) {
				t.Fatalf("ParseSpec(%q) accepted name %q", spec, name)
			}
		}
		trimmed := strings.TrimSpace(spec)
		if trimmed != name && trimmed != name+":"+dsn {
			t.Fatalf("ParseSpec(%q) = %q, %q does not reproduce %q", spec, name, dsn, trimmed)
		}
	})
}
