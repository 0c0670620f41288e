package tfcompat

import (
	"cmp"
	"errors"
	"strings"
	"testing"
)

func TestParseVersion(t *testing.T) {
	tests := []struct {
		in   string
		want string // normalised String()
	}{
		{"2.6.1", "2.6.1"},
		{"2.16.0rc1", "2.16.0rc1"},
		{"2.17.0-rc0", "2.17.0rc0"},
		{"2.17.0.rc0", "2.17.0rc0"},
		{"2.15.0.dev20240101", "2.15.0.dev20240101"},
		{"2.13.0+nv23.08", "2.13.0+nv23.08"},
		{"2.12", "2.12"},
		{"v2.6.0", "2.6.0"},
		{" 2.6.0 ", "2.6.0"},
		{"2.6.0a1", "2.6.0a1"},
		{"2.6.0-beta2", "2.6.0b2"},
		{"2.6.0c3", "2.6.0rc3"},
		{"2.6.1.post1", "2.6.1.post1"},
		{"2.16.1+NV24_01", "2.16.1+nv24.01"},
		{"2.6.0rc", "2.6.0rc0"},
	}
	for _, tt := range tests {
		v, err := ParseVersion(tt.in)
		if err != nil {
			t.Errorf("ParseVersion(%q): %v", tt.in, err)
			continue
		}
		if got := v.String(); got != tt.want {
			t.Errorf("ParseVersion(%q).String() = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestParseVersionErrors(t *testing.T) {
	for _, in := range []string{"", "v", "abc", "2.", ".2", "2..6", "2.6.x", "2.6.0+", "2.6.0+a..b", "2.6.0rc1rc2", "2.6.0 rc1", "1.2.3.4.5.6.7.8.9", "2.6.0+x+y", "99999999999999999999.1", strings.Repeat("1", 300)} {
		_, err := ParseVersion(in)
		if !errors.Is(err, ErrInvalidVersion) {
			t.Errorf("ParseVersion(%q) err = %v, want ErrInvalidVersion", in, err)
			continue
		}
		if !strings.Contains(err.Error(), "accepted forms") {
			t.Errorf("ParseVersion(%q) error %q does not list the accepted forms", in, err)
		}
	}
}

func TestCompareOrder(t *testing.T) {
	// Strictly increasing per PEP 440.
	order := []string{
		"2.5.3",
		"2.6.0.dev20210101",
		"2.6.0a1",
		"2.6.0b1",
		"2.6.0rc0.dev1",
		"2.6.0rc0",
		"2.6.0rc1",
		"2.6.0",
		"2.6.0+local",
		"2.6.0.post1.dev1",
		"2.6.0.post1",
		"2.6.1",
		"2.12",
		"2.12.1",
		"2.16.1+nv24.abc", // a string segment sorts below a number
		"2.16.1+nv24.01",
		"2.16.1+nv24.1.1",
		"2.16.1+nv24.2",
		"2.17.0.dev20240101",
		"2.17.0rc1",
		"2.17",
	}
	vs := make([]Version, len(order))
	for i, s := range order {
		vs[i] = MustParseVersion(s)
	}
	for i := range vs {
		for j := range vs {
			want := cmp.Compare(i, j)
			if got := Compare(vs[i], vs[j]); got != want {
				t.Errorf("Compare(%s, %s) = %d, want %d", order[i], order[j], got, want)
			}
		}
	}
}

func TestCompareTrailingZeros(t *testing.T) {
	if Compare(MustParseVersion("2.12"), MustParseVersion("2.12.0")) != 0 {
		t.Fatal("2.12 != 2.12.0")
	}
}

func TestMustParseVersionPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic for a bad version")
		}
	}()
	MustParseVersion("bad")
}

func FuzzParseVersion(f *testing.F) {
	for _, s := range []string{"2.6.1", "2.16.0rc1", "2.17.0-rc0", "2.15.0.dev20240101", "2.13.0+nv23.08", "2.12", "2.6.1.post1.dev2", "v2.6.0_beta", "2.6.0+a.b-c_d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseVersion(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidVersion) {
				t.Fatalf("error does not wrap ErrInvalidVersion: %v", err)
			}
			return
		}
		// The normalised form must parse back to an equal version.
		w, err := ParseVersion(v.String())
		if err != nil {
			t.Fatalf("String() %q of %q does not parse: %v", v.String(), s, err)
		}
		if Compare(v, w) != 0 || v.String() != w.String() {
			t.Fatalf("round trip %q -> %q -> %q", s, v, w)
		}
		if Compare(v, v) != 0 {
			t.Fatal("Compare(v, v) != 0")
		}
	})
}
