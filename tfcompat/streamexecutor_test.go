package tfcompat

import (
	"errors"
	"strings"
	"testing"
)

func TestFeatures(t *testing.T) {
	tests := []struct {
		v                  string
		growth, memset, hc bool
	}{
		{"2.5.0", false, false, false},
		{"2.6.1", false, false, false},
		{"2.7.0rc1", true, true, true},
		{"2.7.0", true, true, true},
		{"2.16.1", true, true, true},
	}
	for _, tt := range tests {
		f, err := Features(MustParseVersion(tt.v))
		if err != nil {
			t.Errorf("Features(%s): %v", tt.v, err)
			continue
		}
		if f.Major != 0 || f.Minor != 0 || f.Patch != 1 {
			t.Errorf("Features(%s) SE version %d.%d.%d, want 0.0.1", tt.v, f.Major, f.Minor, f.Patch)
		}
		if !f.UseBFCAllocator {
			t.Errorf("Features(%s).UseBFCAllocator = false", tt.v)
		}
		if f.ForceMemoryGrowth != tt.growth || f.Memset != tt.memset || f.HostCallbackAfterMemset != tt.hc {
			t.Errorf("Features(%s) = %+v", tt.v, f)
		}
	}
	for _, v := range []string{"2.4.0", "2.17.0", "2.17.0rc0"} {
		if _, err := Features(MustParseVersion(v)); !errors.Is(err, ErrNoFacts) {
			t.Errorf("Features(%s) err = %v, want ErrNoFacts", v, err)
		}
	}
}

func TestCheckSE(t *testing.T) {
	if err := CheckSE(0, 0); err != nil {
		t.Fatal(err)
	}
	err := CheckSE(1, 0)
	if !errors.Is(err, ErrSEMajorMismatch) {
		t.Fatalf("CheckSE(1, 0) = %v", err)
	}
	if !strings.Contains(err.Error(), "SE_MAJOR 1") || !strings.Contains(err.Error(), "SE_MAJOR 0") {
		t.Errorf("error %q does not name both majors", err)
	}
}
