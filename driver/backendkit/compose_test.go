package backendkit

import (
	"fmt"
	"strings"
	"testing"

	"github.com/accelkit/accelkit/driver"
)

// allCaps is a device type that implements every capability itself, as
// sim's *Device does; its methods answer with its own fields, so a test
// sees which value a call reached. Calls it does not answer panic.
type allCaps struct {
	driver.Device // nil: Device methods other than those below panic
	name          string
	gran          uint64
}

func (d *allCaps) Name() string        { return d.name }
func (d *allCaps) Ordinal() int        { return 7 }
func (d *allCaps) Granularity() uint64 { return d.gran }
func (d *allCaps) Properties() (driver.Properties, error) {
	return driver.Properties{Name: d.name}, nil
}
func (d *allCaps) CanAccessPeer(driver.Device) (bool, error) { return true, nil }
func (d *allCaps) AddressReserve(uint64, uint64) (driver.Ptr, error) {
	return 0, fmt.Errorf("%s: AddressReserve: %w", d.name, driver.ErrNotSupported)
}
func (d *allCaps) AddressFree(driver.Ptr, uint64) error                      { return nil }
func (d *allCaps) MemCreate(uint64) (driver.MemHandle, error)                { return 0, nil }
func (d *allCaps) MemRelease(driver.MemHandle) error                         { return nil }
func (d *allCaps) MemMap(driver.Ptr, uint64, uint64, driver.MemHandle) error { return nil }
func (d *allCaps) MemUnmap(driver.Ptr, uint64) error                         { return nil }
func (d *allCaps) SetAccess(driver.Ptr, uint64) error                        { return nil }
func (d *allCaps) EnablePeerAccess(driver.Device) error                      { return nil }
func (d *allCaps) CopyPeer(driver.Ptr, driver.Ptr, driver.Device, uint64, driver.Stream) error {
	return nil
}
func (d *allCaps) HostRegister(mem []byte) (*driver.HostBuffer, error) {
	return driver.NewHostBuffer(d, mem, d.name), nil
}
func (d *allCaps) HostUnregister(*driver.HostBuffer) error { return nil }
func (d *allCaps) LoadModule([]byte) (driver.Module, error) {
	return nil, fmt.Errorf("%s: LoadModule: %w", d.name, driver.ErrInvalidImage)
}

// plainDev implements Device only.
type plainDev struct{ driver.Device }

func (plainDev) Name() string { return "plain" }

// vmmOnly is a capability implementation separate from the device, as
// cuda's vmmOps is.
type vmmOnly struct{ *allCaps }

// hostRegOnly is a HostRegisterDevice separate from the device, as cuda's
// hostRegOps is.
type hostRegOnly struct{ *allCaps }

// launcherOnly is a Launcher separate from the device.
type launcherOnly struct{ *allCaps }

func TestCompose(t *testing.T) {
	for mask := range 32 {
		wantV, wantP, wantR, wantH, wantL := mask&1 != 0, mask&2 != 0, mask&4 != 0, mask&8 != 0, mask&16 != 0
		t.Run(fmt.Sprintf("vmm=%v,peer=%v,props=%v,hostregister=%v,launcher=%v", wantV, wantP, wantR, wantH, wantL), func(t *testing.T) {
			base := &allCaps{name: "base", gran: 4096}
			caps := Capabilities{}
			if wantV {
				caps.VMM = vmmOnly{&allCaps{name: "vmm", gran: 1 << 21}}
			}
			if wantP {
				caps.Peer = base
			}
			if wantR {
				caps.Properties = base
			}
			if wantH {
				caps.HostRegister = hostRegOnly{&allCaps{name: "hostreg"}}
			}
			if wantL {
				caps.Launcher = launcherOnly{&allCaps{name: "launcher"}}
			}
			dev := Compose(base, caps)
			v, hasV := driver.AsVMM(dev)
			_, hasP := driver.AsPeer(dev)
			_, hasR := dev.(driver.PropertiesDevice)
			h, hasH := driver.AsHostRegister(dev)
			if _, ok := dev.(driver.HostRegisterDevice); ok != hasH {
				t.Errorf("dev.(HostRegisterDevice) = %v but AsHostRegister = %v", ok, hasH)
			}
			l, hasL := driver.AsLauncher(dev)
			if _, ok := dev.(driver.Launcher); ok != hasL {
				t.Errorf("dev.(Launcher) = %v but AsLauncher = %v", ok, hasL)
			}
			if hasV != wantV || hasP != wantP || hasR != wantR || hasH != wantH || hasL != wantL {
				t.Fatalf("Compose offers VMM=%v Peer=%v Properties=%v HostRegister=%v Launcher=%v; want %v %v %v %v %v",
					hasV, hasP, hasR, hasH, hasL, wantV, wantP, wantR, wantH, wantL)
			}
			if dev.Name() != "base" || dev.Ordinal() != 7 {
				t.Errorf("Device methods reach %q/%d; want the base's base/7", dev.Name(), dev.Ordinal())
			}
			if hasV && v.Granularity() != 1<<21 {
				t.Errorf("VMM calls reach granularity %d; want the VMM value's %d", v.Granularity(), 1<<21)
			}
			if hasH {
				if b, _ := h.HostRegister([]byte{1}); b.State() != "hostreg" {
					t.Errorf("HostRegister calls reach %v; want the HostRegister value's hostreg", b.State())
				}
			}
			if hasL {
				if _, err := l.LoadModule(nil); err == nil || !strings.HasPrefix(err.Error(), "launcher:") {
					t.Errorf("LoadModule calls reach %v; want the Launcher value's", err)
				}
			}
			if Unwrap(dev) != driver.Device(base) {
				t.Errorf("Unwrap(Compose(base)) = %v; want base", Unwrap(dev))
			}
			if again := Compose(base, caps); again == dev {
				t.Error("two Compose calls returned one value; each call must build its own")
			}
		})
	}
}

// TestComposeReturnsBase checks the no-wrapper case: a base that offers
// exactly the capabilities asked, each by itself, is handed out as is.
func TestComposeReturnsBase(t *testing.T) {
	base := &allCaps{name: "base"}
	dev := Compose(base, Capabilities{VMM: base, Peer: base, Properties: base, HostRegister: base, Launcher: base})
	if dev != driver.Device(base) {
		t.Errorf("Compose of a base offering exactly its caps = %T; want the base itself", dev)
	}
	if Unwrap(dev) != nil {
		t.Error("Unwrap of a device that is no wrapper is not nil")
	}
	p := plainDev{}
	if dev := Compose(p, Capabilities{}); dev != driver.Device(p) {
		t.Errorf("Compose of a plain device without caps = %T; want the device itself", dev)
	}
	// The same caps provided by another value need the wrapper.
	other := &allCaps{name: "other"}
	if dev := Compose(base, Capabilities{VMM: other, Peer: base, Properties: base, HostRegister: base, Launcher: base}); dev == driver.Device(base) {
		t.Error("Compose returned base although its VMM is another value")
	}
	// A base offering a capability that caps leaves out needs the wrapper
	// too, and the wrapper hides it.
	dev = Compose(base, Capabilities{VMM: base, Peer: base, Properties: base})
	if dev == driver.Device(base) {
		t.Error("Compose returned base although caps leave HostRegister and Launcher out")
	}
	if _, ok := dev.(driver.HostRegisterDevice); ok {
		t.Error("dev.(HostRegisterDevice) is true on a device composed without it")
	}
	if _, ok := dev.(driver.Launcher); ok {
		t.Error("dev.(Launcher) is true on a device composed without it")
	}
	if _, ok := driver.AsLauncher(Compose(base, Capabilities{HostRegister: base})); ok {
		t.Error("AsLauncher is true on a device composed without Launcher, though its base type has LoadModule")
	}
}

func TestUnwrapNil(t *testing.T) {
	if Unwrap(nil) != nil || Unwrap(plainDev{}) != nil {
		t.Error("Unwrap of nil or of a plain device is not nil")
	}
}
