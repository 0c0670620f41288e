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
func withRegistry(t *testing.T, backends ...Backend) {
	t.Helper()
	regMu.Lock()
	saved := registry
	registry = map[string]Backend{}
	for _, b := range backends {
		registry[b.Name] = b
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

// probeOK is a probe that finds a device whatever the dsn.
func probeOK(string) error { return nil }

// probeErr is a probe that finds nothing and says so with err.
func probeErr(err error) Prober { return func(string) error { return err } }

// hw and simulated are fake backends as cuda and sim register: open with
// a probe, at their preference.
func hw(name string, open Opener, probe Prober) Backend {
	return Backend{Name: name, Open: open, Probe: probe, Preference: PreferHardware}
}

func simulated(name string, open Opener) Backend {
	return Backend{Name: name, Open: open, Probe: probeOK, Preference: PreferSimulated}
}

// byName is a backend registered with Register: no probe.
func byName(name string, open Opener) Backend { return Backend{Name: name, Open: open} }

func TestRegister(t *testing.T) {
	withRegistry(t)
	Register("b", fake("b", 1, nil))
	Register("a", fake("a", 1, nil))
	RegisterBackend(Backend{Name: "c", Open: fake("c", 1, nil), Probe: probeOK})
	if got := Drivers(); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("Drivers() = %v, want [a b c]", got)
	}
	for _, tt := range []struct {
		name string
		open Opener
		want string
	}{
		{"a", fake("a", 1, nil), "twice"},
		{"c", fake("c", 1, nil), "twice"},
		{"", fake("", 1, nil), "reserved"},
		{"auto", fake("auto", 1, nil), "reserved"},
		{"d", nil, "nil"},
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
	if b := registry["a"]; b.Probe != nil {
		t.Error("Register gave a backend a probe; it must be opened only by name")
	}
}

func TestOpen(t *testing.T) {
	errNoLib := errors.New("no libcuda")
	errBadDSN := errors.New("cuda dsn: unknown key capacity")
	// probeDSN finds a device unless the dsn has a key the backend does not
	// take, as cuda's probe does.
	probeDSN := func(dsn string) error {
		if strings.Contains(dsn, "capacity") {
			return errBadDSN
		}
		return nil
	}
	tests := []struct {
		name     string
		backends []Backend
		env      string // ACCELKIT_DRIVER; "" leaves it unset
		open     string
		dsn      string
		want     string // backend name chosen
		wantDSN  string
		wantErr  []error // every one must be wrapped
		errText  []string
	}{
		{name: "named", backends: []Backend{simulated("sim", fake("sim", 1, nil))}, open: "sim", dsn: "devices=2", want: "sim", wantDSN: "devices=2"},
		{name: "named without a probe", backends: []Backend{byName("tpu", fake("tpu", 1, nil))}, open: "tpu", want: "tpu"},
		{name: "unknown", backends: []Backend{simulated("sim", fake("sim", 1, nil))}, open: "tpu", wantErr: []error{ErrUnknownBackend}, errText: []string{`driver: unknown backend "tpu" (registered: sim, auto`}},
		{name: "auto prefers cuda with a device", backends: []Backend{simulated("sim", fake("sim", 1, nil)), hw("cuda", fake("cuda", 1, nil), probeOK)}, open: "auto", want: "cuda"},
		{name: "auto falls back to sim without a cuda device", backends: []Backend{simulated("sim", fake("sim", 1, nil)), hw("cuda", fake("cuda", 0, nil), probeOK)}, open: "auto", dsn: "devices=3", want: "sim", wantDSN: "devices=3"},
		{name: "auto falls back to sim when cuda fails", backends: []Backend{simulated("sim", fake("sim", 1, nil)), hw("cuda", failing(errNoLib), probeOK)}, open: "auto", want: "sim"},
		{name: "auto falls back to sim when cuda's probe fails", backends: []Backend{simulated("sim", fake("sim", 1, nil)), hw("cuda", fake("cuda", 1, nil), probeErr(errNoLib))}, open: "auto", want: "sim"},
		{name: "auto passes the dsn to the probe", backends: []Backend{simulated("sim", fake("sim", 1, nil)), hw("cuda", fake("cuda", 1, nil), probeDSN)}, open: "auto", dsn: "capacity=1GiB", want: "sim", wantDSN: "capacity=1GiB"},
		{name: "auto gives the dsn to the chosen backend", backends: []Backend{simulated("sim", fake("sim", 1, nil)), hw("cuda", fake("cuda", 1, nil), probeDSN)}, open: "auto", dsn: "lib=/x", want: "cuda", wantDSN: "lib=/x"},
		{name: "auto orders by preference", backends: []Backend{
			{Name: "a", Open: fake("a", 1, nil), Probe: probeOK, Preference: 1},
			{Name: "b", Open: fake("b", 1, nil), Probe: probeOK, Preference: 5},
			{Name: "c", Open: fake("c", 1, nil), Probe: probeOK, Preference: 3},
		}, open: "auto", want: "b"},
		{name: "auto breaks a preference tie by name", backends: []Backend{
			{Name: "zeta", Open: fake("zeta", 1, nil), Probe: probeOK, Preference: 7},
			{Name: "alpha", Open: fake("alpha", 1, nil), Probe: probeOK, Preference: 7},
		}, open: "auto", want: "alpha"},
		{name: "auto never chooses a backend without a probe", backends: []Backend{byName("tpu", fake("tpu", 1, nil)), simulated("sim", fake("sim", 1, nil))}, open: "auto", want: "sim"},
		{name: "auto without sim reports cuda's failure", backends: []Backend{hw("cuda", fake("cuda", 1, nil), probeErr(errNoLib))}, open: "auto",
			wantErr: []error{ErrNoDevice, errNoLib}, errText: []string{"cuda: probe: no libcuda"}},
		{name: "auto passes over every candidate that fails", backends: []Backend{
			hw("cuda", fake("cuda", 1, nil), probeErr(errNoLib)),
			hw("rocm", fake("rocm", 0, nil), probeOK),
			simulated("sim", fake("sim", 1, nil)),
			byName("tpu", fake("tpu", 1, nil)),
		}, open: "auto", dsn: "capacity=1GiB", env: "auto:capacity=1GiB", want: "sim", wantDSN: "capacity=1GiB"},
		{name: "auto error names each backend and what its probe said", backends: []Backend{
			hw("cuda", fake("cuda", 1, nil), probeErr(errNoLib)),
			hw("rocm", fake("rocm", 0, nil), probeOK),
			{Name: "sim", Open: fake("sim", 1, nil), Probe: probeErr(errBadDSN)},
			byName("tpu", fake("tpu", 1, nil)),
		}, open: "auto",
			wantErr: []error{ErrNoDevice, errNoLib, errBadDSN},
			errText: []string{"driver: no device: auto opened no backend", "cuda: probe: no libcuda", "rocm: probe found a device, then the opened driver had none", "sim: probe: cuda dsn: unknown key capacity", "tpu: registered without a probe"}},
		{name: "auto with nothing registered", open: "auto", wantErr: []error{ErrNoDevice}, errText: []string{"no backend to probe", "driver/sim"}},
		{name: "auto with only probeless backends", backends: []Backend{byName("tpu", fake("tpu", 1, nil))}, open: "auto", wantErr: []error{ErrNoDevice}, errText: []string{"no backend to probe", "tpu: registered without a probe"}},
		{name: "env names a backend", backends: []Backend{simulated("sim", fake("sim", 1, nil)), hw("cuda", fake("cuda", 1, nil), probeOK)}, env: "sim:devices=2", open: "auto", want: "sim", wantDSN: "devices=2"},
		{name: "env names a backend without a probe", backends: []Backend{simulated("sim", fake("sim", 1, nil)), byName("tpu", fake("tpu", 1, nil))}, env: "tpu", open: "auto", want: "tpu"},
		{name: "env auto with a dsn", backends: []Backend{simulated("sim", fake("sim", 1, nil))}, env: "auto:capacity=1GiB", open: "auto", want: "sim", wantDSN: "capacity=1GiB"},
		{name: "env is ignored by a named Open", backends: []Backend{simulated("sim", fake("sim", 1, nil)), hw("cuda", fake("cuda", 1, nil), probeOK)}, env: "sim", open: "cuda", want: "cuda"},
		{name: "env with a bad name", backends: []Backend{simulated("sim", fake("sim", 1, nil))}, env: "si m:x", open: "auto", errText: []string{EnvDriver}},
		{name: "env names an unregistered backend", backends: []Backend{simulated("sim", fake("sim", 1, nil))}, env: "cuda", open: "auto", wantErr: []error{ErrUnknownBackend}, errText: []string{`driver: unknown backend "cuda" in ACCELKIT_DRIVER="cuda" (registered: sim, auto`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			withRegistry(t, tt.backends...)
			t.Setenv(EnvDriver, tt.env)
			drv, err := Open(tt.open, tt.dsn)
			if tt.wantErr != nil || tt.errText != nil {
				if err == nil {
					t.Fatalf("Open(%q) = %v, want an error", tt.open, drv.Name())
				}
				for _, w := range tt.wantErr {
					if !errors.Is(err, w) {
						t.Errorf("error %v does not wrap %v", err, w)
					}
				}
				for _, text := range tt.errText {
					if !strings.Contains(err.Error(), text) {
						t.Errorf("error %q does not mention %q", err, text)
					}
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
	withRegistry(t, simulated("sim", fake("sim", 1, nil)), hw("cuda", fake("cuda", 0, &closed), probeOK))
	t.Setenv(EnvDriver, "")
	if _, err := OpenDefault(); err != nil {
		t.Fatal(err)
	}
	if !closed {
		t.Error("auto left a cuda driver without devices open")
	}
}

// TestOpenAutoProbesBeforeOpening checks that auto opens only the backend it
// chooses: a backend whose probe fails is never opened, and none after the
// chosen one is probed.
func TestOpenAutoProbesBeforeOpening(t *testing.T) {
	var opened, probed []string
	track := func(name string, probeErr error) Backend {
		return Backend{
			Name: name,
			Open: func(dsn string) (Driver, error) {
				opened = append(opened, name)
				return &fakeDriver{name: name, devices: 1}, nil
			},
			Probe:      func(string) error { probed = append(probed, name); return probeErr },
			Preference: map[string]int{"gpu": 3, "npu": 2, "sim": 1}[name],
		}
	}
	withRegistry(t, track("gpu", ErrNoDevice), track("npu", nil), track("sim", nil))
	t.Setenv(EnvDriver, "")
	drv, err := Open("auto", "")
	if err != nil {
		t.Fatal(err)
	}
	if drv.Name() != "npu" || !slices.Equal(probed, []string{"gpu", "npu"}) || !slices.Equal(opened, []string{"npu"}) {
		t.Errorf("auto opened %s after probing %v and opening %v; want npu after probing [gpu npu] and opening [npu]", drv.Name(), probed, opened)
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
