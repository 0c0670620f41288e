package tfcompat

import (
	"errors"
	"strings"
	"testing"
)

func TestSupportedRange(t *testing.T) {
	tests := []struct {
		v    string
		want bool
	}{
		{"2.5.3", false},
		{"2.6.0rc2", false}, // sorts below the minimum
		{"2.6", true},
		{"2.6.0", true},
		{"2.6.1", true},
		{"2.12", true},
		{"2.16.0rc1", true},          // another pre-release inside
		{"2.16.0.dev20240101", true}, // dev release inside
		{"2.16.1", true},
		{"2.16.1+nv24.01", true}, // local version inside
		{"2.16.9.post3", true},
		{"2.17.0rc1", false},          // pre-release of the exclusive max
		{"2.17.0-rc0", false},         // same, other spelling
		{"2.17.0.dev20240101", false}, // dev release of the exclusive max
		{"2.17.0a1.dev3", false},
		{"2.17", false},
		{"2.17.0", false},
		{"2.17.0+nv", false},
		{"3.0", false},
	}
	for _, tt := range tests {
		if got := Supported.Contains(MustParseVersion(tt.v)); got != tt.want {
			t.Errorf("Supported.Contains(%s) = %v, want %v", tt.v, got, tt.want)
		}
	}
}

func TestRangePreReleaseMax(t *testing.T) {
	// When the max is itself a pre-release, the rule does not apply.
	r := Range{Min: MustParseVersion("1.0"), Max: MustParseVersion("2.0rc2")}
	if !r.Contains(MustParseVersion("2.0rc1")) {
		t.Error("2.0rc1 should be inside <2.0rc2")
	}
	if r.Contains(MustParseVersion("2.0rc2")) {
		t.Error("2.0rc2 should be outside <2.0rc2")
	}
}

func TestCheck(t *testing.T) {
	if err := Check(MustParseVersion("2.16.1")); err != nil {
		t.Fatalf("Check(2.16.1) = %v", err)
	}
	err := Check(MustParseVersion("2.17.0rc1"))
	if !errors.Is(err, ErrUnsupported) {
		t.Fatalf("Check(2.17.0rc1) = %v, want ErrUnsupported", err)
	}
	for _, want := range []string{"2.17.0rc1", ">=2.6, <2.17", "2.6.1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if err := CheckString("nope"); !errors.Is(err, ErrInvalidVersion) {
		t.Errorf("CheckString(nope) = %v", err)
	}
	if err := CheckString("2.10.0"); err != nil {
		t.Errorf("CheckString(2.10.0) = %v", err)
	}
}
