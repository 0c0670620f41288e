package sim

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/accelkit/accelkit/driver"
)

func TestMmapErr(t *testing.T) {
	tests := []struct {
		err  error
		want error
		word string
	}{
		{unix.ENOMEM, driver.ErrOutOfMemory, "vm.max_map_count"},
		{unix.EMFILE, driver.ErrOutOfMemory, "file limit"},
		{unix.EINVAL, driver.ErrInvalidValue, "mmap of 4096 bytes"},
	}
	for _, tt := range tests {
		err := mmapErr("pinned host memory", 4096, tt.err)
		if !errors.Is(err, tt.want) || !errors.Is(err, tt.err) || !strings.Contains(err.Error(), tt.word) {
			t.Errorf("mmapErr(%v) = %v; want it to wrap %v and %v and mention %q", tt.err, err, tt.want, tt.err, tt.word)
		}
	}
}

func TestReserveRangeAlignment(t *testing.T) {
	for _, align := range []uint64{pageSize, 2 << 20, 64 << 20} {
		p, err := reserveRange(4<<20, align)
		if err != nil {
			t.Fatal(err)
		}
		if p%align != 0 {
			t.Errorf("reserveRange(4 MiB, %d) = %#x, not aligned", align, p)
		}
		if err := unmap(p, 4<<20); err != nil {
			t.Error(err)
		}
	}
}

func TestFill(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 100, 4097} {
		for _, v := range []byte{0, 0xa5} {
			b := make([]byte, n)
			for i := range b {
				b[i] = ^v
			}
			fill(b, v)
			for i, x := range b {
				if x != v {
					t.Fatalf("fill(%d bytes, %#x): byte %d = %#x", n, v, i, x)
				}
			}
		}
	}
}
