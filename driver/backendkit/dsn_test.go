package backendkit

import (
	"errors"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/accelkit/accelkit/driver"
)

var testKeys = []string{"devices", "capacity", "vmm"}

func TestParseDSN(t *testing.T) {
	tests := []struct {
		dsn     string
		want    DSN
		wantErr string // substring of the error; "" means success
	}{
		{"", DSN{}, ""},
		{"   ", DSN{}, ""},
		{"devices=2", DSN{"devices": "2"}, ""},
		{" devices = 2 , vmm=false", DSN{"devices": "2", "vmm": "false"}, ""},
		{"capacity=", DSN{"capacity": ""}, ""},
		{"capacity=a=b", DSN{"capacity": "a=b"}, ""},
		{"devices", nil, "not key=value"},
		{"=2", nil, "not key=value"},
		{"devices=2,", nil, "entry 2"},
		{"colour=red", nil, `unknown key "colour" (valid keys: devices, capacity, vmm)`},
		{"devices=1,devices=2", nil, "given twice"},
		{"Devices=1", nil, "unknown key"},
	}
	for _, tt := range tests {
		t.Run(tt.dsn, func(t *testing.T) {
			got, err := ParseDSN("test", tt.dsn, testKeys)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, driver.ErrInvalidValue) {
					t.Fatalf("ParseDSN(%q) = %v, %v; want an ErrInvalidValue mentioning %q", tt.dsn, got, err, tt.wantErr)
				}
				if !strings.Contains(err.Error(), "devices, capacity, vmm") && !strings.Contains(err.Error(), "twice") {
					t.Errorf("error %q does not list the valid keys", err)
				}
				return
			}
			if err != nil || !maps.Equal(got, tt.want) {
				t.Fatalf("ParseDSN(%q) = %v, %v; want %v", tt.dsn, got, err, tt.want)
			}
		})
	}
}

func TestDSNValues(t *testing.T) {
	d := DSN{"n": "5", "bad": "x", "b": "true", "z": "0", "size": "64MiB", "f": "0.5", "nan": "NaN"}
	if v, err := d.Int("n", 1, 0, 10); v != 5 || err != nil {
		t.Errorf("Int(n) = %d, %v", v, err)
	}
	if v, err := d.Int("absent", 7, 0, 10); v != 7 || err != nil {
		t.Errorf("Int(absent) = %d, %v; want the default", v, err)
	}
	for _, key := range []string{"bad", "n"} {
		if _, err := d.Int(key, 0, 6, 10); !errors.Is(err, driver.ErrInvalidValue) || !strings.Contains(err.Error(), "[6, 10]") {
			t.Errorf("Int(%s) out of range: %v", key, err)
		}
	}
	if v, err := d.Bool("b", false); !v || err != nil {
		t.Errorf("Bool(b) = %v, %v", v, err)
	}
	if v, err := d.Bool("z", true); v || err != nil {
		t.Errorf("Bool(z) = %v, %v", v, err)
	}
	if _, err := d.Bool("bad", false); !errors.Is(err, driver.ErrInvalidValue) {
		t.Errorf("Bool(bad) = %v", err)
	}
	if v, err := d.Bytes("size", 0); v != 64<<20 || err != nil {
		t.Errorf("Bytes(size) = %d, %v", v, err)
	}
	if v, err := d.Bytes("absent", 9); v != 9 || err != nil {
		t.Errorf("Bytes(absent) = %d, %v", v, err)
	}
	if _, err := d.Bytes("bad", 0); !errors.Is(err, driver.ErrInvalidValue) || !strings.Contains(err.Error(), "dsn key bad") {
		t.Errorf("Bytes(bad) = %v", err)
	}
	if v, err := d.Float("f", 0, 0, 1); v != 0.5 || err != nil {
		t.Errorf("Float(f) = %v, %v", v, err)
	}
	if v, err := d.Float("absent", 0.25, 0, 1); v != 0.25 || err != nil {
		t.Errorf("Float(absent) = %v, %v", v, err)
	}
	for _, key := range []string{"nan", "bad", "n"} {
		if _, err := d.Float(key, 0, 0, 1); !errors.Is(err, driver.ErrInvalidValue) {
			t.Errorf("Float(%s) = %v, want ErrInvalidValue", key, err)
		}
	}
}

func TestParseBytes(t *testing.T) {
	tests := []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"0", 0, true},
		{"4096", 4096, true},
		{"8GiB", 8 << 30, true},
		{" 512 MiB ", 512 << 20, true},
		{"1KiB", 1024, true},
		{"1TiB", 1 << 40, true},
		{"3kB", 3000, true},
		{"2KB", 2000, true},
		{"5MB", 5e6, true},
		{"7GB", 7e9, true},
		{"1TB", 1e12, true},
		{"10B", 10, true},
		{"18446744073709551615", math.MaxUint64, true},
		{"16777216TiB", 0, false}, // 2^64: overflows
		{"18446744073709551616", 0, false},
		{"", 0, false},
		{"GiB", 0, false},
		{"-1", 0, false},
		{"1.5GiB", 0, false},
		{"1 gib", 0, false},
		{"0x10", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseBytes(tt.in)
		if tt.ok && (err != nil || got != tt.want) {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
		if !tt.ok && (err == nil || !errors.Is(err, driver.ErrInvalidValue) || !strings.Contains(err.Error(), "KiB")) {
			t.Errorf("ParseBytes(%q) = %d, %v; want an ErrInvalidValue naming the units", tt.in, got, err)
		}
	}
}

// FuzzParseDSN checks that ParseDSN never panics, accepts only valid keys,
// and that what it accepts survives a round trip through its own syntax.
func FuzzParseDSN(f *testing.F) {
	for _, s := range []string{"", "devices=2", "devices=2,capacity=8GiB,vmm=true", " vmm = false ", "x=1", "devices=1,devices=1", "=", ",", "capacity=a=b", "devices=\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, dsn string) {
		d, err := ParseDSN("fuzz", dsn, testKeys)
		if err != nil {
			if !errors.Is(err, driver.ErrInvalidValue) {
				t.Fatalf("error %v does not wrap ErrInvalidValue", err)
			}
			return
		}
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(d)) {
			if !slices.Contains(testKeys, k) {
				t.Fatalf("accepted unknown key %q", k)
			}
			if strings.ContainsAny(k, "=,") || k != strings.TrimSpace(k) || strings.Contains(d[k], ",") || d[k] != strings.TrimSpace(d[k]) {
				t.Fatalf("entry %q=%q is not normalised", k, d[k])
			}
			parts = append(parts, k+"="+d[k])
		}
		again, err := ParseDSN("fuzz", strings.Join(parts, ","), testKeys)
		if err != nil || !maps.Equal(again, d) {
			t.Fatalf("round trip of %v gave %v, %v", d, again, err)
		}
	})
}

// FuzzParseBytes checks ParseBytes against its own formatting.
func FuzzParseBytes(f *testing.F) {
	for _, s := range []string{"0", "8GiB", "512 MiB", "1kB", "18446744073709551615", "16777216TiB", "-1", "1.5GiB", "B"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseBytes(s)
		if err != nil {
			if !errors.Is(err, driver.ErrInvalidValue) {
				t.Fatalf("error %v does not wrap ErrInvalidValue", err)
			}
			return
		}
		if m, err := ParseBytes(strings.TrimSpace(s)); err != nil || m != n {
			t.Fatalf("ParseBytes(%q) = %d but trimmed gives %d, %v", s, n, m, err)
		}
	})
}
