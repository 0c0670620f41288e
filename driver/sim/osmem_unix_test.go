//go:build linux || darwin || freebsd

package sim

import (
	"bytes"
	"errors"
	"os"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/accelkit/accelkit/driver"
)

func TestMmapErr(t *testing.T) {
	limit := "vm.max_map_count"
	if runtime.GOOS != "linux" {
		limit = "ulimit -n"
	}
	tests := []struct {
		err  error
		want error
		word string
	}{
		{unix.ENOMEM, driver.ErrOutOfMemory, limit},
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

func TestFileMemErr(t *testing.T) {
	tests := []struct {
		err  error
		want error
		word string
	}{
		{&os.PathError{Op: "open", Path: "/tmp/x", Err: unix.ENOSPC}, driver.ErrOutOfMemory, "exhausted"},
		{&os.PathError{Op: "open", Path: "/tmp/x", Err: unix.EMFILE}, driver.ErrOutOfMemory, "open-file limit"},
		{&os.PathError{Op: "open", Path: "/tmp/x", Err: unix.EACCES}, driver.ErrInvalidValue, "TMPDIR"},
	}
	for _, tt := range tests {
		err := fileMemErr(1<<20, tt.err)
		if !errors.Is(err, tt.want) || !errors.Is(err, tt.err) || !strings.Contains(err.Error(), tt.word) ||
			!strings.Contains(err.Error(), os.TempDir()) {
			t.Errorf("fileMemErr(%v) = %v; want it to wrap %v and %v and mention %q and the directory", tt.err, err, tt.want, tt.err, tt.word)
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

// TestPhysMemAliases maps one piece of physical memory at two addresses of a
// reservation and checks that they are the same memory, for the backend
// this build uses (newPhysMem) and for the portable one (newFileMem), which
// macOS and FreeBSD use and Linux tests here.
func TestPhysMemAliases(t *testing.T) {
	for _, b := range []struct {
		name string
		new  func(uint64) (*os.File, error)
	}{{"newPhysMem", newPhysMem}, {"newFileMem", newFileMem}} {
		t.Run(b.name, func(t *testing.T) {
			size := 4 * pageSize
			f, err := b.new(2 * size)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if fi, err := f.Stat(); err != nil || fi.Size() != int64(2*size) {
				t.Fatalf("backing file: size %v, %v; want %d bytes", fi.Size(), err, 2*size)
			}
			if b.name == "newFileMem" {
				if _, err := os.Stat(f.Name()); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("backing file %s is still linked (%v); want it removed at once", f.Name(), err)
				}
			}
			r, err := reserveRange(2*size, pageSize)
			if err != nil {
				t.Fatal(err)
			}
			defer unmap(r, 2*size)
			// Both views show the second half of the file.
			for _, at := range []uint64{r, r + size} {
				if err := mapFileFixed(at, size, f, size); err != nil {
					t.Fatal(err)
				}
			}
			if err := protectRW(r, 2*size); err != nil {
				t.Fatal(err)
			}
			a, c := bytesAt(r, size), bytesAt(r+size, size)
			for i := range a {
				a[i] = byte(i*13 + 1)
			}
			if !bytes.Equal(a, c) {
				t.Fatal("a write through one mapping is not seen through the other")
			}
			head := make([]byte, size)
			if _, err := f.ReadAt(head, 0); err != nil || !bytes.Equal(head, make([]byte, size)) {
				t.Errorf("the first half of the file changed (%v): the mappings are not at offset %d", err, size)
			}
			for _, at := range []uint64{r, r + size} {
				if err := unmapFixed(at, size); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func TestTotalRAM(t *testing.T) {
	if totalRAM() == 0 {
		t.Errorf("totalRAM() = 0 on %s", runtime.GOOS)
	}
}
