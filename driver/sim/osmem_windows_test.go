package sim

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/windows"

	"github.com/accelkit/accelkit/driver"
)

func TestVAErr(t *testing.T) {
	tests := []struct {
		err  error
		want error
		word string
	}{
		{windows.ERROR_NOT_ENOUGH_MEMORY, driver.ErrOutOfMemory, "commit limit"},
		{windows.ERROR_COMMITMENT_LIMIT, driver.ErrOutOfMemory, "paging file"},
		{windows.ERROR_INVALID_PARAMETER, driver.ErrInvalidValue, "VirtualAlloc of 4096 bytes"},
	}
	for _, tt := range tests {
		err := vaErr("pinned host memory", 4096, tt.err)
		if !errors.Is(err, tt.want) || !errors.Is(err, tt.err) || !strings.Contains(err.Error(), tt.word) {
			t.Errorf("vaErr(%v) = %v; want it to wrap %v and %v and mention %q", tt.err, err, tt.want, tt.err, tt.word)
		}
	}
}

func TestTotalRAM(t *testing.T) {
	if totalRAM() == 0 {
		t.Error("totalRAM() = 0: GlobalMemoryStatusEx failed")
	}
}

// TestMapHostAndUnmap checks that pinned host memory is writable at once and
// that VirtualFree takes it back. (A second VirtualFree is not tried: the
// runtime may have been given the range again meanwhile.)
func TestMapHostAndUnmap(t *testing.T) {
	size := 16 * pageSize
	p, err := mapHost(size)
	if err != nil {
		t.Fatal(err)
	}
	b := bytesAt(p, size)
	for i := range b {
		b[i] = byte(i)
	}
	if b[size-1] != byte(size-1) {
		t.Fatal("host memory did not keep a write")
	}
	if err := unmap(p, size); err != nil {
		t.Fatal(err)
	}
}
