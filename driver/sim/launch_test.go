package sim_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/drivertest"
	"github.com/accelkit/accelkit/driver/sim"
)

// Kernels these tests register, once per process (the registry is
// process-wide, and -count=2 runs the tests twice).
func init() {
	// simtest_peek reads n bytes at p: a test of Mem's bounds.
	must(sim.RegisterKernel("simtest_peek", []uint32{8, 8}, func(b *sim.Block) error {
		_, err := b.Mem(b.Ptr(0), b.Uint64(1))
		return err
	}))
	// simtest_ignore reads out of bounds but ignores the error: still a
	// fault.
	must(sim.RegisterKernel("simtest_ignore", []uint32{8}, func(b *sim.Block) error {
		_, _ = b.Mem(b.Ptr(0), 1<<40)
		return nil
	}))
	// simtest_badarg reads its only argument as the wrong type: a panic,
	// which is a fault.
	must(sim.RegisterKernel("simtest_badarg", []uint32{8}, func(b *sim.Block) error {
		_ = b.Int32(0)
		return nil
	}))
	// simtest_geom writes, per block, its index and dims into out[block].
	must(sim.RegisterKernel("simtest_geom", []uint32{8, 4}, func(b *sim.Block) error {
		g, idx := b.GridDim(), b.BlockIdx()
		lin := uint64(idx.X) + uint64(g.X)*(uint64(idx.Y)+uint64(g.Y)*uint64(idx.Z))
		m, err := b.Mem(b.Ptr(0)+driver.Ptr(16*lin), 16)
		if err != nil {
			return err
		}
		bd := b.BlockDim()
		binary.LittleEndian.PutUint32(m[0:], idx.X|idx.Y<<8|idx.Z<<16)
		binary.LittleEndian.PutUint32(m[4:], bd.X*bd.Y*bd.Z)
		binary.LittleEndian.PutUint32(m[8:], uint32(len(b.Shared())))
		binary.LittleEndian.PutUint32(m[12:], b.Uint32(1))
		return nil
	}))
	must(sim.RegisterKernel("simtest_mismatch", []uint32{8, 8}, func(*sim.Block) error { return nil }))
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

const testPTX = `.version 7.0
.target sm_50
.address_size 64
.visible .entry simtest_peek(.param .u64 p, .param .u64 n) { ret; }
.visible .entry simtest_ignore(.param .u64 p) { ret; }
.visible .entry simtest_badarg(.param .u64 p) { ret; }
.visible .entry simtest_geom(.param .u64 out, .param .u32 tag) { ret; }
.visible .entry simtest_mismatch(.param .u64 p, .param .u32 n) { ret; }
.visible .entry simtest_unregistered(.param .u64 p) { ret; }
`

// launchDev opens a one-device sim with dsn and returns its Launcher.
func launchDev(t *testing.T, dsn string) (*sim.Driver, driver.Device, driver.Launcher) {
	t.Helper()
	drv, err := sim.Open(dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	dev, err := drv.Device(0)
	if err != nil {
		t.Fatal(err)
	}
	l, ok := driver.AsLauncher(dev)
	if !ok {
		t.Fatal("sim device offers no Launcher")
	}
	return drv, dev, l
}

func kernelOf(t *testing.T, l driver.Launcher, src, name string) driver.Kernel {
	t.Helper()
	m, err := l.LoadModule([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	k, err := m.Kernel(name)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestRegisterKernelErrors(t *testing.T) {
	fn := func(*sim.Block) error { return nil }
	for _, tt := range []struct {
		name   string
		params []uint32
		fn     sim.KernelFunc
		want   string
	}{
		{"", nil, fn, "empty kernel name"},
		{"a b", nil, fn, "not a PTX identifier"},
		{"simtest_nilfn", nil, nil, "nil KernelFunc"},
		{"simtest_zero", []uint32{8, 0}, fn, "parameter 1 has size 0"},
		{"simtest_huge", []uint32{32000, 1000}, fn, "at most 32764"},
		{"accelkit_vector_add", []uint32{8, 8, 8, 4}, fn, "registered already"},
		{"simtest_peek", []uint32{8, 8}, fn, "registered already"},
	} {
		err := sim.RegisterKernel(tt.name, tt.params, tt.fn)
		if !errors.Is(err, driver.ErrInvalidValue) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("RegisterKernel(%q) = %v; want ErrInvalidValue saying %q", tt.name, err, tt.want)
		}
	}
}

func TestLaunchConfigOff(t *testing.T) {
	drv, err := sim.Open("launcher=false")
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	dev, _ := drv.Device(0)
	if _, ok := driver.AsLauncher(dev); ok {
		t.Error("launcher=false: the device still offers driver.Launcher")
	}
	drv2, err := sim.New(sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer drv2.Close()
	if dev, _ := drv2.Device(0); dev != nil {
		if _, ok := driver.AsLauncher(dev); ok {
			t.Error("a Config literal without Launcher offers driver.Launcher")
		}
	}
}

func TestLoadModuleRefuses(t *testing.T) {
	_, _, l := launchDev(t, "")
	fakeCubin := "\x7fELFACCELKIT-FAKE-CUBIN sm_90\n" + drivertest.KernelPTX
	for _, tt := range []struct{ name, image, want string }{
		{"elf", fakeCubin, "runs PTX text only"},
		{"fatbin", "\x50\xed\x55\xba\x01\x00\x10\x00", "runs PTX text only"},
		{"junk", "hello", "not a program image"},
		{"empty", "", "not a program image"},
		{"bad ptx", ".version 7.0\n.target sm_50\n.entry k(.param .u64", "PTX: line 3"},
	} {
		_, err := l.LoadModule([]byte(tt.image))
		if !errors.Is(err, driver.ErrInvalidImage) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: LoadModule = %v; want ErrInvalidImage saying %q", tt.name, err, tt.want)
		}
	}
	// PTX as a C string: a NUL ends it.
	if _, err := l.LoadModule([]byte(drivertest.KernelPTX + "\x00\x00")); err != nil {
		t.Errorf("LoadModule of NUL-terminated PTX: %v", err)
	}
}

func TestModuleKernel(t *testing.T) {
	_, _, l := launchDev(t, "")
	m, err := l.LoadModule([]byte(testPTX))
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Kernel("nope")
	if !errors.Is(err, driver.ErrNotFound) || !strings.Contains(err.Error(), "no .entry") {
		t.Errorf("Kernel of a name not in the image = %v; want ErrNotFound", err)
	}
	_, err = m.Kernel("simtest_unregistered")
	if !errors.Is(err, driver.ErrNotFound) || !strings.Contains(err.Error(), `sim.RegisterKernel("simtest_unregistered"`) {
		t.Errorf("Kernel without a Go function = %v; want ErrNotFound naming sim.RegisterKernel", err)
	}
	k1, err := m.Kernel("simtest_geom")
	if err != nil {
		t.Fatal(err)
	}
	if k2, _ := m.Kernel("simtest_geom"); k2 != k1 {
		t.Error("two Kernel calls for one name give two kernels")
	}
	if p, ok := k1.Params(); !ok || len(p) != 2 || p[0] != (driver.Param{Offset: 0, Size: 8}) || p[1] != (driver.Param{Offset: 8, Size: 4}) {
		t.Errorf("Params = %v, %v; want [{0 8} {8 4}], true", p, ok)
	}
	// The PTX says (u64, u32), the Go function (8, 8): refused at launch.
	km, err := m.Kernel("simtest_mismatch")
	if err != nil {
		t.Fatal(err)
	}
	err = km.Launch(nil, driver.LaunchConfig{}, new(driver.Args).Ptr(0).Uint32(1))
	if !errors.Is(err, driver.ErrInvalidValue) || !strings.Contains(err.Error(), "registered with sim.RegisterKernel takes [8 8]") {
		t.Errorf("launch with PTX and Go parameters differing = %v; want ErrInvalidValue", err)
	}
	if err := m.Unload(); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Kernel("simtest_geom"); !errors.Is(err, driver.ErrInvalidValue) {
		t.Errorf("Kernel after Unload = %v; want ErrInvalidValue", err)
	}
}

func TestLaunchGeometry(t *testing.T) {
	_, dev, l := launchDev(t, "")
	k := kernelOf(t, l, testPTX, "simtest_geom")
	grid := driver.Dim3{X: 3, Y: 2, Z: 2}
	out, err := dev.Malloc(16 * 12)
	if err != nil {
		t.Fatal(err)
	}
	cfg := driver.LaunchConfig{Grid: grid, Block: driver.Dim3{X: 4, Y: 2}, SharedMem: 100}
	if err := k.Launch(nil, cfg, new(driver.Args).Ptr(out).Uint32(77)); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 16*12)
	if err := dev.CopyDtoHSync(got, out); err != nil {
		t.Fatal(err)
	}
	i := 0
	for z := range uint32(2) {
		for y := range uint32(2) {
			for x := range uint32(3) {
				rec := got[16*i:]
				want := [4]uint32{x | y<<8 | z<<16, 8, 100, 77}
				for j, w := range want {
					if v := binary.LittleEndian.Uint32(rec[4*j:]); v != w {
						t.Errorf("block (%d,%d,%d) field %d = %d; want %d", x, y, z, j, v, w)
					}
				}
				i++
			}
		}
	}
	for _, bad := range []driver.LaunchConfig{
		{Block: driver.Dim3{X: 1025}},
		{Block: driver.Dim3{X: 2, Y: 2, Z: 65}},
		{Grid: driver.Dim3{Y: 65536}},
		{SharedMem: sim.MaxSharedPerBlock + 1},
	} {
		if err := k.Launch(nil, bad, new(driver.Args).Ptr(out).Uint32(1)); !errors.Is(err, driver.ErrInvalidValue) {
			t.Errorf("Launch with %+v = %v; want ErrInvalidValue", bad, err)
		}
	}
}

// TestKernelFaults checks that each way a kernel faults is a sticky stream
// error and loses the device, with the cause in the message.
func TestKernelFaults(t *testing.T) {
	for _, tt := range []struct {
		kernel string
		args   func(p driver.Ptr) *driver.Args
		want   string
	}{
		{"simtest_peek", func(p driver.Ptr) *driver.Args { return new(driver.Args).Ptr(p).Uint64(4097) }, "runs past the end of its allocation"},
		{"simtest_peek", func(p driver.Ptr) *driver.Args { return new(driver.Args).Ptr(8).Uint64(1) }, "does not start in a live allocation"},
		{"simtest_ignore", func(p driver.Ptr) *driver.Args { return new(driver.Args).Ptr(p) }, "runs past the end"},
		{"simtest_badarg", func(p driver.Ptr) *driver.Args { return new(driver.Args).Ptr(p) }, "panic: sim: kernel simtest_badarg reads argument 0 as an int32 (4 bytes); it is 8 bytes"},
		{drivertest.KernelFault, func(p driver.Ptr) *driver.Args { return new(driver.Args).Ptr(p) }, "trap"},
	} {
		t.Run(tt.kernel+"/"+tt.want, func(t *testing.T) {
			_, dev, l := launchDev(t, "devices=2")
			src := testPTX
			if tt.kernel == drivertest.KernelFault {
				src = drivertest.KernelPTX
			}
			k := kernelOf(t, l, src, tt.kernel)
			p, err := dev.Malloc(4096)
			if err != nil {
				t.Fatal(err)
			}
			s, err := dev.NewStream()
			if err != nil {
				t.Fatal(err)
			}
			if err := k.Launch(s, driver.LaunchConfig{}, tt.args(p)); err != nil {
				t.Fatalf("Launch: %v", err)
			}
			err = s.Synchronize()
			if !errors.Is(err, driver.ErrDeviceLost) || !errors.Is(err, sim.ErrKernelFault) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Synchronize after a faulting kernel = %v; want ErrDeviceLost and ErrKernelFault saying %q", err, tt.want)
			}
			if _, err := dev.Malloc(1); !errors.Is(err, driver.ErrDeviceLost) {
				t.Errorf("Malloc after a kernel fault = %v; want ErrDeviceLost", err)
			}
			if err := k.Launch(nil, driver.LaunchConfig{}, tt.args(p)); !errors.Is(err, driver.ErrDeviceLost) {
				t.Errorf("Launch after a kernel fault = %v; want ErrDeviceLost", err)
			}
		})
	}
}

// TestLaunchOnFreedMemory: memory freed after the launch was queued, before
// it ran, is a fault when the kernel touches it.
func TestLaunchOnFreedMemory(t *testing.T) {
	_, dev, l := launchDev(t, "")
	k := kernelOf(t, l, drivertest.KernelPTX, drivertest.KernelScale)
	p, _ := dev.Malloc(4096)
	s, _ := dev.NewStream()
	open, err := sim.Hooks(dev).Gate(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Launch(s, driver.LaunchConfig{Block: driver.Dim3{X: 256}, Grid: driver.Dim3{X: 4}}, new(driver.Args).Ptr(p).Float32(2).Int32(1024)); err != nil {
		t.Fatal(err)
	}
	if err := dev.Free(p); err != nil {
		t.Fatal(err)
	}
	open()
	if err := s.Synchronize(); !errors.Is(err, sim.ErrKernelFault) {
		t.Errorf("kernel on memory freed before it ran: %v; want ErrKernelFault", err)
	}
}

// TestUnloadQueued: a launch queued before Unload runs; one after is
// refused.
func TestUnloadQueued(t *testing.T) {
	_, dev, l := launchDev(t, "")
	m, err := l.LoadModule([]byte(drivertest.KernelPTX))
	if err != nil {
		t.Fatal(err)
	}
	k, _ := m.Kernel(drivertest.KernelScale)
	p, _ := dev.Malloc(4)
	if err := dev.CopyHtoDSync(p, f32bytes(3)); err != nil {
		t.Fatal(err)
	}
	s, _ := dev.NewStream()
	open, _ := sim.Hooks(dev).Gate(s)
	args := new(driver.Args).Ptr(p).Float32(2).Int32(1)
	if err := k.Launch(s, driver.LaunchConfig{}, args); err != nil {
		t.Fatal(err)
	}
	if err := m.Unload(); err != nil {
		t.Fatal(err)
	}
	if err := m.Unload(); err != nil {
		t.Errorf("second Unload = %v; want nil", err)
	}
	if err := k.Launch(s, driver.LaunchConfig{}, args); !errors.Is(err, driver.ErrInvalidValue) {
		t.Errorf("Launch after Unload = %v; want ErrInvalidValue", err)
	}
	open()
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	if err := dev.CopyDtoHSync(got, p); err != nil {
		t.Fatal(err)
	}
	if v := math.Float32frombits(binary.LittleEndian.Uint32(got)); v != 6 {
		t.Errorf("the launch queued before Unload gave %v; want 6", v)
	}
}

func TestLaunchAfterClose(t *testing.T) {
	drv, dev, l := launchDev(t, "")
	m, _ := l.LoadModule([]byte(drivertest.KernelPTX))
	k, _ := m.Kernel(drivertest.KernelScale)
	p, _ := dev.Malloc(4)
	if err := drv.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.LoadModule([]byte(drivertest.KernelPTX)); !errors.Is(err, driver.ErrClosed) {
		t.Errorf("LoadModule after Close = %v; want ErrClosed", err)
	}
	if _, err := m.Kernel(drivertest.KernelScale); !errors.Is(err, driver.ErrClosed) {
		t.Errorf("Kernel after Close = %v; want ErrClosed", err)
	}
	if err := k.Launch(nil, driver.LaunchConfig{}, new(driver.Args).Ptr(p).Float32(1).Int32(1)); !errors.Is(err, driver.ErrClosed) {
		t.Errorf("Launch after Close = %v; want ErrClosed", err)
	}
	if err := m.Unload(); !errors.Is(err, driver.ErrClosed) {
		t.Errorf("Unload after Close = %v; want ErrClosed", err)
	}
}

// TestCloseWhileKernelsQueued: Close with launches queued behind a gate
// and running returns, freeing the memory they used.
func TestCloseWhileKernelsQueued(t *testing.T) {
	drv, dev, l := launchDev(t, "")
	k := kernelOf(t, l, drivertest.KernelPTX, drivertest.KernelScale)
	const n = 1 << 16
	p, _ := dev.Malloc(4 * n)
	s, _ := dev.NewStream()
	_, _ = sim.Hooks(dev).Gate(s)
	for range 50 {
		if err := k.Launch(s, driver.LaunchConfig{Grid: driver.Dim3{X: n / 256}, Block: driver.Dim3{X: 256}}, new(driver.Args).Ptr(p).Float32(1).Int32(n)); err != nil {
			t.Fatal(err)
		}
	}
	if err := drv.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestLaunchConcurrent launches from several goroutines on several streams
// at once, loads and unloads modules meanwhile, and checks every result.
func TestLaunchConcurrent(t *testing.T) {
	_, dev, l := launchDev(t, "")
	m, err := l.LoadModule([]byte(drivertest.KernelPTX))
	if err != nil {
		t.Fatal(err)
	}
	const (
		workers = 6
		rounds  = 40
		n       = 1000
	)
	var wg sync.WaitGroup
	errs := make(chan error, workers+1)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- func() error {
				s, err := dev.NewStream()
				if err != nil {
					return err
				}
				defer s.Destroy()
				add, err := m.Kernel(drivertest.KernelVectorAdd)
				if err != nil {
					return err
				}
				sum, err := m.Kernel(drivertest.KernelReduceSum)
				if err != nil {
					return err
				}
				a, _ := dev.Malloc(4 * n)
				c, _ := dev.Malloc(4 * n)
				out, _ := dev.Malloc(4)
				defer dev.Free(a)
				defer dev.Free(c)
				defer dev.Free(out)
				host := make([]byte, 4*n)
				for i := range n {
					binary.LittleEndian.PutUint32(host[4*i:], math.Float32bits(float32(w+i%5)))
				}
				if err := dev.CopyHtoDSync(a, host); err != nil {
					return err
				}
				var args driver.Args
				cfg := driver.LaunchConfig{Grid: driver.Dim3{X: (n + 127) / 128}, Block: driver.Dim3{X: 128}}
				for range rounds {
					if err := dev.Memset(out, 0, 4, s); err != nil {
						return err
					}
					args.Reset()
					if err := add.Launch(s, cfg, args.Ptr(a).Ptr(a).Ptr(c).Int32(n)); err != nil {
						return err
					}
					args.Reset()
					if err := sum.Launch(s, cfg, args.Ptr(c).Ptr(out).Int32(n)); err != nil {
						return err
					}
				}
				if err := s.Synchronize(); err != nil {
					return err
				}
				got := make([]byte, 4)
				if err := dev.CopyDtoHSync(got, out); err != nil {
					return err
				}
				want := float32(0)
				for i := range n {
					want += 2 * float32(w+i%5)
				}
				if v := math.Float32frombits(binary.LittleEndian.Uint32(got)); v != want {
					return fmt.Errorf("worker %d: sum = %v; want %v", w, v, want)
				}
				return nil
			}()
		}()
	}
	wg.Add(1)
	go func() { // modules come and go beside the launches
		defer wg.Done()
		for range rounds {
			m2, err := l.LoadModule([]byte(drivertest.KernelPTX))
			if err == nil {
				_, err = m2.Kernel(drivertest.KernelScale)
			}
			if err == nil {
				err = m2.Unload()
			}
			if err != nil {
				errs <- err
				return
			}
		}
		errs <- nil
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

func f32bytes(vs ...float32) []byte {
	b := make([]byte, 4*len(vs))
	for i, v := range vs {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

// TestLaunchRacingUnload launches from several goroutines while another
// unloads the module: every launch that returned nil must have run (each
// doubles x), and every other one must be refused with ErrInvalidValue.
func TestLaunchRacingUnload(t *testing.T) {
	_, dev, l := launchDev(t, "")
	for range 20 {
		m, err := l.LoadModule([]byte(drivertest.KernelPTX))
		if err != nil {
			t.Fatal(err)
		}
		k, _ := m.Kernel(drivertest.KernelScale)
		x, _ := dev.Malloc(4)
		if err := dev.CopyHtoDSync(x, f32bytes(1)); err != nil {
			t.Fatal(err)
		}
		s, _ := dev.NewStream()
		var (
			wg       sync.WaitGroup
			mu       sync.Mutex
			launched int
		)
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 8 {
					err := k.Launch(s, driver.LaunchConfig{}, new(driver.Args).Ptr(x).Float32(2).Int32(1))
					switch {
					case err == nil:
						mu.Lock()
						launched++
						mu.Unlock()
					case !errors.Is(err, driver.ErrInvalidValue):
						t.Errorf("Launch racing Unload = %v; want nil or ErrInvalidValue", err)
					}
				}
			}()
		}
		if err := m.Unload(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if err := s.Synchronize(); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 4)
		if err := dev.CopyDtoHSync(got, x); err != nil {
			t.Fatal(err)
		}
		if v := math.Float32frombits(binary.LittleEndian.Uint32(got)); v != float32(math.Ldexp(1, launched)) {
			t.Fatalf("x = %v after %d accepted launches; want 2^%d: an accepted launch did not run", v, launched, launched)
		}
		s.Destroy()
		dev.Free(x)
	}
}
