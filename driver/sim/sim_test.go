package sim_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/sim"
)

// open opens a sim driver with dsn, closed when the test ends.
func open(t testing.TB, dsn string) *sim.Driver {
	t.Helper()
	drv, err := sim.Open(dsn)
	if err != nil {
		t.Fatalf("sim.Open(%q): %v", dsn, err)
	}
	t.Cleanup(func() { drv.Close() })
	return drv
}

// device returns device i of drv and its hooks.
func device(t testing.TB, drv *sim.Driver, i int) (driver.Device, *sim.Device) {
	t.Helper()
	dev, err := drv.Device(i)
	if err != nil {
		t.Fatalf("Device(%d): %v", i, err)
	}
	h := sim.Hooks(dev)
	if h == nil {
		t.Fatalf("Hooks(%T) = nil", dev)
	}
	return dev, h
}

// needVMM returns dev's VMM, skipping the test where the sim offers none
// (Windows).
func needVMM(t testing.TB, dev driver.Device) driver.VMM {
	t.Helper()
	vmm, ok := driver.AsVMM(dev)
	if !sim.DefaultConfig().VMM {
		if ok {
			t.Fatalf("device %T offers VMM where the sim has none", dev)
		}
		t.Skip("the sim offers no VMM on this OS")
	}
	if !ok {
		t.Fatalf("device %T does not offer VMM", dev)
	}
	return vmm
}

func mustMalloc(t testing.TB, dev driver.Device, n uint64) driver.Ptr {
	t.Helper()
	p, err := dev.Malloc(n)
	if err != nil {
		t.Fatalf("Malloc(%d): %v", n, err)
	}
	return p
}

func mustHost(t testing.TB, dev driver.Device, n int) *driver.HostBuffer {
	t.Helper()
	b, err := dev.HostAlloc(n)
	if err != nil {
		t.Fatalf("HostAlloc(%d): %v", n, err)
	}
	return b
}

// wantErr fails unless err wraps every one of want and its message has
// every one of words.
func wantErr(t *testing.T, what string, err error, want []error, words ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: got nil error, want %v", what, want)
	}
	for _, w := range want {
		if !errors.Is(err, w) {
			t.Errorf("%s: error %q does not wrap %q", what, err, w)
		}
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: error %q does not mention %q", what, err, w)
		}
	}
}

func TestOpenDSN(t *testing.T) {
	vmm := sim.DefaultConfig().VMM // false where the sim offers no VMM
	tests := []struct {
		dsn     string
		want    sim.Config
		wantErr string
	}{
		{"", sim.DefaultConfig(), ""},
		{"devices=2,capacity=64MiB", sim.Config{Devices: 2, Capacity: 64 << 20, VMM: vmm, Granularity: 2 << 20, Peer: true, HostRegister: true, Launcher: true}, ""},
		{"vmm=false,peer=false,granularity=64KiB", sim.Config{Devices: 1, Capacity: 8 << 30, Granularity: 64 << 10, HostRegister: true, Launcher: true}, ""},
		{" devices = 3 ", sim.Config{Devices: 3, Capacity: 8 << 30, VMM: vmm, Granularity: 2 << 20, Peer: true, HostRegister: true, Launcher: true}, ""},
		{"hostregister=false", sim.Config{Devices: 1, Capacity: 8 << 30, VMM: vmm, Granularity: 2 << 20, Peer: true, Launcher: true}, ""},
		{"launcher=false", sim.Config{Devices: 1, Capacity: 8 << 30, VMM: vmm, Granularity: 2 << 20, Peer: true, HostRegister: true}, ""},
		{"launcher=perhaps", sim.Config{}, "launcher"},
		{"hostregister=sometimes", sim.Config{}, "hostregister"},
		{"devices=0", sim.Config{}, "devices"},
		{"devices=abc", sim.Config{}, "devices"},
		{"capacity=0", sim.Config{}, "capacity"},
		{"capacity=lots", sim.Config{}, "capacity"},
		{"granularity=3000", sim.Config{}, "granularity"},
		{"granularity=0", sim.Config{}, "granularity"},
		{"vmm=maybe", sim.Config{}, "vmm"},
		{"color=red", sim.Config{}, "valid keys: devices, capacity, vmm, granularity, peer, hostregister, launcher"},
		{"devices=1,devices=2", sim.Config{}, "twice"},
	}
	for _, tt := range tests {
		t.Run(tt.dsn, func(t *testing.T) {
			drv, err := sim.Open(tt.dsn)
			if tt.wantErr != "" {
				wantErr(t, "Open", err, []error{driver.ErrInvalidValue}, tt.wantErr)
				return
			}
			if err != nil {
				t.Fatalf("Open(%q): %v", tt.dsn, err)
			}
			defer drv.Close()
			if got := drv.Config(); got != tt.want {
				t.Errorf("Config() = %+v, want %+v", got, tt.want)
			}
			if got := drv.DeviceCount(); got != tt.want.Devices {
				t.Errorf("DeviceCount() = %d, want %d", got, tt.want.Devices)
			}
		})
	}
}

func TestRegistered(t *testing.T) {
	drv, err := driver.Open("sim", "devices=2")
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	if drv.Name() != "sim" || drv.DeviceCount() != 2 {
		t.Errorf("Open(sim, devices=2): name %q, %d devices", drv.Name(), drv.DeviceCount())
	}
	if _, err := drv.Device(2); !errors.Is(err, driver.ErrNoDevice) {
		t.Errorf("Device(2) of 2: %v, want ErrNoDevice", err)
	}
}

// TestAuto checks the sim's probe through Open("auto"): the sim is a
// candidate that always finds its device, given a dsn it takes, and its
// probe reports a dsn it refuses without opening anything.
func TestAuto(t *testing.T) {
	t.Setenv(driver.EnvDriver, "")
	drv, err := driver.Open("auto", "devices=2")
	if err != nil {
		t.Fatalf("Open(auto, devices=2) with only sim registered: %v", err)
	}
	defer drv.Close()
	if drv.Name() != "sim" || drv.DeviceCount() != 2 {
		t.Errorf("Open(auto, devices=2): name %q, %d devices; want sim with 2", drv.Name(), drv.DeviceCount())
	}
	bad := []struct{ dsn, says string }{
		{"devices=two", "devices"},
		{"colour=red", "colour"},
		{"granularity=3KiB", "granularity"},
	}
	if !sim.DefaultConfig().VMM {
		bad = append(bad, struct{ dsn, says string }{"vmm=true", "vmm=false"})
	}
	for _, tt := range bad {
		_, err := driver.Open("auto", tt.dsn)
		if !errors.Is(err, driver.ErrNoDevice) || !strings.Contains(err.Error(), "sim: probe: ") || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("Open(auto, %s) = %v; want ErrNoDevice with the sim's probe error about %s", tt.dsn, err, tt.says)
		}
	}
}

func TestCapabilities(t *testing.T) {
	vmm := sim.DefaultConfig().VMM // false where the sim offers no VMM
	tests := []struct {
		dsn             string
		vmm, peer, hreg bool
	}{
		{"", vmm, true, true},
		{"vmm=false", false, true, true},
		{"peer=false", vmm, false, true},
		{"vmm=false,peer=false", false, false, true},
		{"hostregister=false", vmm, true, false},
		{"vmm=false,peer=false,hostregister=false", false, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.dsn, func(t *testing.T) {
			drv := open(t, tt.dsn)
			dev, h := device(t, drv, 0)
			if _, ok := driver.AsVMM(dev); ok != tt.vmm {
				t.Errorf("AsVMM = %v, want %v", ok, tt.vmm)
			}
			if _, ok := driver.AsPeer(dev); ok != tt.peer {
				t.Errorf("AsPeer = %v, want %v", ok, tt.peer)
			}
			if _, ok := dev.(driver.HostRegisterDevice); ok != tt.hreg {
				t.Errorf("dev.(driver.HostRegisterDevice) = %v, want %v", ok, tt.hreg)
			}
			if _, ok := dev.(driver.PropertiesDevice); !ok {
				t.Error("device does not offer PropertiesDevice")
			}
			if tt.vmm && tt.peer && tt.hreg {
				if _, ok := dev.(*sim.Device); !ok {
					t.Errorf("device is %T, want *sim.Device when every capability is on", dev)
				}
			}
			if !tt.vmm {
				if _, err := h.AddressReserve(2<<20, 0); !errors.Is(err, driver.ErrNotSupported) {
					t.Errorf("AddressReserve with vmm=false: %v, want ErrNotSupported", err)
				}
			}
			if !tt.hreg {
				_, err := h.HostRegister(make([]byte, 64))
				wantErr(t, "HostRegister through Hooks with hostregister=false", err, []error{driver.ErrNotSupported}, "hostregister=false")
			}
			s, err := dev.NewStream()
			if err != nil {
				t.Fatal(err)
			}
			if s.Device() != dev {
				t.Errorf("Stream.Device() = %v, want the handed-out device %v", s.Device(), dev)
			}
			if sim.Hooks(s.Device()) != h {
				t.Error("Hooks(Stream.Device()) is not the device's hooks")
			}
		})
	}
	if sim.Hooks(nil) != nil {
		t.Error("Hooks(nil) != nil")
	}
}

func TestProperties(t *testing.T) {
	drv := open(t, "devices=2,capacity=64MiB")
	dev, _ := device(t, drv, 1)
	p, err := dev.(driver.PropertiesDevice).Properties()
	if err != nil {
		t.Fatal(err)
	}
	if !p.Simulated || p.Name != "accelkit sim device 1" || p.TotalMemory != 64<<20 || dev.Name() != p.Name {
		t.Errorf("Properties = %+v", p)
	}
}

func TestRoundTrip(t *testing.T) {
	drv := open(t, "capacity=64MiB")
	dev, _ := device(t, drv, 0)
	const n = 1 << 20
	p := mustMalloc(t, dev, n)
	hb := mustHost(t, dev, n)
	for i := range hb.Bytes() {
		hb.Bytes()[i] = byte(i * 7)
	}
	s, err := dev.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	out := mustHost(t, dev, n)
	if err := dev.CopyHtoD(p, hb.Bytes(), s); err != nil {
		t.Fatal(err)
	}
	if err := dev.CopyDtoH(out.Bytes(), p, s); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), hb.Bytes()) {
		t.Fatal("async round trip changed the data")
	}
	// A nil stream is the default stream.
	if err := dev.Memset(p+200, 0xcc, 10, nil); err != nil {
		t.Fatalf("Memset on the nil stream: %v", err)
	}
	if err := dev.DefaultStream().Synchronize(); err != nil {
		t.Fatal(err)
	}
	set := make([]byte, 10)
	if err := dev.CopyDtoHSync(set, p+200); err != nil || !bytes.Equal(set, bytes.Repeat([]byte{0xcc}, 10)) {
		t.Fatalf("Memset on the nil stream wrote %x, %v", set, err)
	}
	got := make([]byte, 100)
	if err := dev.CopyDtoHSync(got, p+10); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, hb.Bytes()[10:110]) {
		t.Fatal("sync copy at an offset read the wrong bytes")
	}
}
