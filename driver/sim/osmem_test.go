package sim

import (
	"errors"
	"strings"
	"testing"

	"github.com/accelkit/accelkit/driver"
)

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

// TestVMMUnavailable runs, on every OS, what Windows does: without VMM
// support the default configuration has VMM off, asking for it is
// ErrNotSupported, and the device offers no driver.VMM.
func TestVMMUnavailable(t *testing.T) {
	if defaultConfig(false).VMM {
		t.Error("defaultConfig(false).VMM = true")
	}
	if DefaultConfig().VMM != vmmAvailable {
		t.Errorf("DefaultConfig().VMM = %v, want vmmAvailable %v", DefaultConfig().VMM, vmmAvailable)
	}
	for _, dsn := range []string{"vmm=true", "devices=2,vmm=true"} {
		drv, err := open(dsn, false)
		if err == nil {
			drv.Close()
		}
		if !errors.Is(err, driver.ErrNotSupported) || !strings.Contains(err.Error(), "vmm=false") {
			t.Errorf("open(%q) without VMM support = %v; want ErrNotSupported suggesting vmm=false", dsn, err)
		}
	}
	if _, err := newDriver(Config{VMM: true}, false); !errors.Is(err, driver.ErrNotSupported) {
		t.Errorf("newDriver(VMM: true) without VMM support = %v; want ErrNotSupported", err)
	}
	for _, dsn := range []string{"", "vmm=false,devices=2"} {
		drv, err := open(dsn, false)
		if err != nil {
			t.Fatalf("open(%q) without VMM support: %v", dsn, err)
		}
		if drv.Config().VMM {
			t.Errorf("open(%q) without VMM support: Config().VMM = true", dsn)
		}
		dev, _ := drv.Device(0)
		if _, ok := driver.AsVMM(dev); ok {
			t.Errorf("open(%q) without VMM support: device %T offers driver.VMM", dsn, dev)
		}
		if _, ok := driver.AsPeer(dev); !ok {
			t.Errorf("open(%q) without VMM support: device %T lost driver.Peer", dsn, dev)
		}
		if _, err := Hooks(dev).AddressReserve(DefaultGranularity, 0); !errors.Is(err, driver.ErrNotSupported) {
			t.Errorf("AddressReserve without VMM support = %v; want ErrNotSupported", err)
		}
		if err := drv.Close(); err != nil {
			t.Error(err)
		}
	}
}
