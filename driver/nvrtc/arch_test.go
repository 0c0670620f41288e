package nvrtc

import (
	"errors"
	"testing"
)

func TestParseArch(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want arch
	}{
		{"sm_90", arch{number: 90}},
		{"sm_90a", arch{number: 90, suffix: "a"}},
		{"sm_100f", arch{number: 100, suffix: "f"}},
		{"compute_75", arch{virtual: true, number: 75}},
		{"compute_121a", arch{virtual: true, number: 121, suffix: "a"}},
	} {
		got, err := parseArch(tc.in)
		if err != nil || got != tc.want || got.String() != tc.in {
			t.Errorf("parseArch(%q) = %+v (%s), %v; want %+v", tc.in, got, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "sm_", "sm90", "sm_9", "sm_090", "sm_90b", "sm_90af", "SM_90", "compute_", "lto_90", "sm_99999", " sm_90", "sm_90 ", "sm_-90", "sm_+90"} {
		if a, err := parseArch(in); !errors.Is(err, ErrUnsupportedArch) {
			t.Errorf("parseArch(%q) = %+v, %v; want ErrUnsupportedArch", in, a, err)
		}
	}
}

// FuzzParseArch checks that every accepted architecture formats back to
// itself with its number in range, and every refused one says
// ErrUnsupportedArch.
func FuzzParseArch(f *testing.F) {
	for _, s := range []string{"sm_90", "sm_90a", "sm_100f", "compute_80", "compute_120a", "", "sm_", "sm_0", "sm_9999", "sm_10000", "compute_90z", "sm_٩٠"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := parseArch(s)
		if err != nil {
			if !errors.Is(err, ErrUnsupportedArch) {
				t.Fatalf("parseArch(%q): %v does not wrap ErrUnsupportedArch", s, err)
			}
			return
		}
		if a.String() != s || a.number < 10 || a.number > maxArch {
			t.Fatalf("parseArch(%q) = %+v, formats as %q", s, a, a)
		}
	})
}
