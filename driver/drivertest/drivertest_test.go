package drivertest_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/drivertest"
	"github.com/accelkit/accelkit/driver/sim"
)

func openSim(dsn string) func(t *testing.T) driver.Driver {
	return func(t *testing.T) driver.Driver {
		drv, err := sim.Open(dsn)
		if err != nil {
			t.Fatal(err)
		}
		return drv
	}
}

func TestSim(t *testing.T) {
	drivertest.Run(t, openSim("devices=2,capacity=512MiB"))
}

// buggyDriver hands out devices that break one rule each, so the suite can
// be shown to catch them.
type buggyDriver struct {
	driver.Driver
	bug    string
	closed bool
}

// Close with bug "closetwice" fails the second time, as Close did before
// the convention made it idempotent.
func (d *buggyDriver) Close() error {
	err := d.Driver.Close()
	if d.bug == "closetwice" && d.closed {
		return fmt.Errorf("buggy: Close: driver already %w", driver.ErrClosed)
	}
	d.closed = true
	return err
}

func (d buggyDriver) Device(i int) (driver.Device, error) {
	dev, err := d.Driver.Device(i)
	if err != nil {
		return nil, err
	}
	if d.bug == "regcopy" {
		return buggyRegDevice{buggyDevice{dev, d.bug}}, nil
	}
	if l, ok := driver.AsLauncher(dev); ok && strings.HasPrefix(d.bug, "launch") {
		return buggyLaunchDevice{buggyDevice{dev, d.bug}, l}, nil
	}
	return buggyDevice{dev, d.bug}, nil
}

// buggyRegDevice offers a HostRegister that pins a copy of the caller's
// memory (a HostAlloc buffer) instead of the memory itself: the copies
// work, but on memory the caller never sees.
type buggyRegDevice struct{ buggyDevice }

func (d buggyRegDevice) HostRegister(mem []byte) (*driver.HostBuffer, error) {
	b, err := d.HostAlloc(len(mem))
	if err != nil {
		return nil, err
	}
	copy(b.Bytes(), mem)
	return b, nil
}

func (d buggyRegDevice) HostUnregister(b *driver.HostBuffer) error { return d.HostFree(b) }

type buggyDevice struct {
	driver.Device
	bug string
}

func (d buggyDevice) Malloc(n uint64) (driver.Ptr, error) {
	if d.bug == "malloc0" && n == 0 {
		return 0, errors.New("zero size")
	}
	return d.Device.Malloc(n)
}

func (d buggyDevice) Free(p driver.Ptr) error {
	if err := d.Device.Free(p); err != nil && d.bug != "silentfree" {
		return err
	}
	return nil
}

// HostFree with bug "hostfreefail" frees the buffer but reports failure.
func (d buggyDevice) HostFree(b *driver.HostBuffer) error {
	err := d.Device.HostFree(b)
	if d.bug == "hostfreefail" && b.Len() > 0 {
		return errors.Join(err, errors.New("spurious HostFree failure"))
	}
	return err
}

func (d buggyDevice) CopyHtoD(dst driver.Ptr, src []byte, s driver.Stream) error {
	if d.bug == "nilstream" && s == nil {
		return fmt.Errorf("buggy: CopyHtoD: nil stream: %w", driver.ErrInvalidValue)
	}
	if d.bug == "unpinned" {
		return d.CopyHtoDSync(dst, src)
	}
	return d.Device.CopyHtoD(dst, src, s)
}

func (d buggyDevice) Memset(dst driver.Ptr, v byte, n uint64, s driver.Stream) error {
	if d.bug == "memset" && n > 1 {
		n-- // drops the last byte
	}
	return d.Device.Memset(dst, v, n, s)
}

// buggyLaunchDevice offers the sim's Launcher with the bug of its name.
type buggyLaunchDevice struct {
	buggyDevice
	l driver.Launcher
}

func (d buggyLaunchDevice) LoadModule(image []byte) (driver.Module, error) {
	m, err := d.l.LoadModule(image)
	if err != nil {
		return nil, err
	}
	return buggyModule{m, d.bug}, nil
}

type buggyModule struct {
	driver.Module
	bug string
}

// Kernel with bug "launchnotfound" reports a missing name as
// ErrInvalidValue, as a backend that maps CUDA_ERROR_NOT_FOUND badly.
func (m buggyModule) Kernel(name string) (driver.Kernel, error) {
	k, err := m.Module.Kernel(name)
	if err != nil && m.bug == "launchnotfound" {
		return nil, fmt.Errorf("buggy: Kernel(%q): %w", name, driver.ErrInvalidValue)
	}
	if err != nil {
		return nil, err
	}
	return buggyKernel{k, m.bug}, nil
}

// Unload with bug "launchunloadtwice" fails the second time.
func (m buggyModule) Unload() error {
	if m.bug == "launchunloadtwice" {
		if _, err := m.Module.Kernel(drivertest.KernelScale); errors.Is(err, driver.ErrInvalidValue) {
			return fmt.Errorf("buggy: Unload: already unloaded: %w", driver.ErrInvalidValue)
		}
	}
	return m.Module.Unload()
}

type buggyKernel struct {
	driver.Kernel
	bug string
}

// Launch with bug "launchgrid0" takes a zero grid for no blocks, and with
// bug "launchnocheck" does not check the arguments (and passes the
// kernel's own count, so it still runs).
func (k buggyKernel) Launch(s driver.Stream, cfg driver.LaunchConfig, args *driver.Args) error {
	switch {
	case k.bug == "launchgrid0" && cfg.Grid.X == 0:
		return nil
	case k.bug == "launchnocheck":
		if p, _ := k.Params(); args.Len() != len(p) {
			return nil
		}
	}
	return k.Kernel.Launch(s, cfg, args)
}

// TestBrokenBackend runs the suite on a broken backend; it is meant to
// fail, so it only runs inside TestSuiteCatchesBugs's child process.
func TestBrokenBackend(t *testing.T) {
	bug := os.Getenv("DRIVERTEST_BUG")
	if bug == "" {
		t.Skip("run by TestSuiteCatchesBugs")
	}
	drivertest.Run(t, func(t *testing.T) driver.Driver {
		return &buggyDriver{Driver: openSim("capacity=512MiB")(t), bug: bug}
	})
}

func TestSuiteCatchesBugs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the suite in child processes")
	}
	tests := []struct{ bug, rule string }{
		{"malloc0", "rule: Malloc(0) returns (0, nil)"},
		{"silentfree", "rule: a double Free is ErrInvalidPointer"},
		{"unpinned", "rule: CopyHtoD from Go memory is ErrNotPinned"},
		{"memset", "rule: HtoD, DtoD, Memset and DtoH on one stream round-trip the data"},
		{"hostfreefail", "rule: devices, streams and events are safe for concurrent use: spurious HostFree failure"},
		{"nilstream", "rule: CopyHtoD with a nil stream is accepted (nil is the default stream)"},
		{"closetwice", "rule: Close is idempotent: a second Close returns nil"},
		{"regcopy", "rule: HostRegister returns a buffer over exactly the memory given"},
		{"launchgrid0", "rule: a zero Dim3 component means 1 (a zero grid is one block)"},
		{"launchnotfound", "rule: Module.Kernel of a name the image does not have is ErrNotFound"},
		{"launchunloadtwice", "rule: Unload is idempotent: a second call returns nil"},
		{"launchnocheck", "rule: too few arguments is ErrInvalidValue"},
	}
	for _, tt := range tests {
		t.Run(tt.bug, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestBrokenBackend$", "-test.v")
			cmd.Env = append(os.Environ(), "DRIVERTEST_BUG="+tt.bug)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed a backend with bug %q:\n%s", tt.bug, out)
			}
			if !strings.Contains(string(out), tt.rule) {
				t.Errorf("the suite failed bug %q without naming %q:\n%s", tt.bug, tt.rule, out)
			}
		})
	}
}
