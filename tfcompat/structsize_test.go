package tfcompat

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckStructSize(t *testing.T) {
	tests := []struct {
		got, known int
		ok         bool
		want       string
	}{
		{32, 32, true, ""},
		{40, 32, true, ""},         // a newer writer: the reader ignores the tail
		{24, 32, false, "24 < 32"}, // aws-neuron-sdk#1095: the writer is older
		{0, 32, false, "is 0 (unset)"},
		{0, 0, false, "is 0 (unset)"},
		{8, -1, true, ""},
	}
	for _, tt := range tests {
		err := CheckStructSize("PJRT_Plugin_Attributes_Args", tt.got, tt.known)
		if tt.ok {
			if err != nil {
				t.Errorf("CheckStructSize(%d, %d) = %v", tt.got, tt.known, err)
			}
			continue
		}
		var se *StructSizeError
		if !errors.Is(err, ErrStructSize) || !errors.As(err, &se) {
			t.Errorf("CheckStructSize(%d, %d) = %v, want a *StructSizeError", tt.got, tt.known, err)
			continue
		}
		if se.Got != tt.got || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "PJRT_Plugin_Attributes_Args") {
			t.Errorf("CheckStructSize(%d, %d) = %q, want it to name the struct and %q", tt.got, tt.known, err, tt.want)
		}
	}
}
