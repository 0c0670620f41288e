package drivertest

// The Launcher rules, checked when the device offers driver.Launcher: a
// module of KernelPTX loads, its kernels compute what the host computes on
// sizes that are and are not multiples of the block, launches keep stream
// order with copies and events, a launch the kernel cannot take is refused
// before anything is queued, and Unload and Close end the module. The
// fault rule poisons the device, so it runs only where the suite may do
// that (a device with Faults).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/accelkit/accelkit/driver"
)

// blockSize is the block the rules launch with: a common choice, and
// sizes below are picked around its multiples.
const blockSize = 256

// launchSizes are the element counts the kernels are checked on: one
// element, exactly one block, a count that is no multiple of the block
// (the guard i < n must hold the last block's extra threads back), and
// enough blocks that a GPU runs them on several multiprocessors.
var launchSizes = []int{1, blockSize, 1000, 3*blockSize + 7, 1 << 18}

// launcher returns the device's Launcher or skips the test.
func launcher(t *testing.T, e *env) driver.Launcher {
	t.Helper()
	l, ok := driver.AsLauncher(e.dev)
	if !ok {
		t.Skipf("%s device offers no Launcher", e.drv.Name())
	}
	return l
}

// refModule loads KernelPTX and unloads it when the test ends (ignoring
// the result: rules unload and close on purpose).
func refModule(t *testing.T, l driver.Launcher) driver.Module {
	t.Helper()
	m, err := l.LoadModule([]byte(KernelPTX))
	must(t, "LoadModule of drivertest.KernelPTX (PTX 7.0 for sm_50) succeeds", err)
	t.Cleanup(func() { _ = m.Unload() })
	return m
}

func refKernel(t *testing.T, m driver.Module, name string) driver.Kernel {
	t.Helper()
	k, err := m.Kernel(name)
	must(t, fmt.Sprintf("Module.Kernel(%q) of KernelPTX succeeds", name), err)
	if k.Name() != name {
		t.Errorf("rule: Kernel.Name is the name asked for: got %q, want %q", k.Name(), name)
	}
	return k
}

// grid1D is the launch of n threads in blocks of blockSize.
func grid1D(n int) driver.LaunchConfig {
	return driver.LaunchConfig{Grid: driver.Dim3{X: uint32((n + blockSize - 1) / blockSize)}, Block: driver.Dim3{X: blockSize}}
}

// putFloats writes vs into b (little-endian float32s).
func putFloats(b []byte, vs []float32) {
	for i, v := range vs {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
}

// getFloats reads n float32s from b.
func getFloats(b []byte, n int) []float32 {
	vs := make([]float32, n)
	for i := range vs {
		vs[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return vs
}

// inputs returns n values whose every partial sum is exact in float32
// (small integers and halves), so a reduction in any order gives one
// answer, and two vectors a, b derived from seed.
func inputs(n int, seed int) (a, b []float32) {
	a, b = make([]float32, n), make([]float32, n)
	for i := range n {
		a[i] = float32((i*7+seed)%13) - 6
		b[i] = float32((i*5+seed)%11) * 0.5
	}
	return a, b
}

// upload copies vs into fresh device memory.
func (e *env) upload(t *testing.T, vs []float32) driver.Ptr {
	t.Helper()
	p := e.malloc(t, uint64(4*len(vs)))
	b := make([]byte, 4*len(vs))
	putFloats(b, vs)
	must(t, "CopyHtoDSync", e.dev.CopyHtoDSync(p, b))
	return p
}

// download reads n float32s of device memory at p, after the default
// stream's work.
func (e *env) download(t *testing.T, p driver.Ptr, n int) []float32 {
	t.Helper()
	b := make([]byte, 4*n)
	must(t, "CopyDtoHSync", e.dev.CopyDtoHSync(b, p))
	return getFloats(b, n)
}

// firstDiff returns the first index where got and want differ, or -1.
func firstDiff(got, want []float32) int {
	for i := range want {
		if got[i] != want[i] {
			return i
		}
	}
	return -1
}

func testLaunch(t *testing.T, e *env) {
	l := launcher(t, e)
	d := e.dev
	m := refModule(t, l)
	add := refKernel(t, m, KernelVectorAdd)
	scale := refKernel(t, m, KernelScale)
	sum := refKernel(t, m, KernelReduceSum)
	for _, k := range []struct {
		k     driver.Kernel
		sizes []uint32
	}{{add, []uint32{8, 8, 8, 4}}, {scale, []uint32{8, 4, 4}}, {sum, []uint32{8, 8, 4}}} {
		params, ok := k.k.Params()
		if !ok {
			continue
		}
		if len(params) != len(k.sizes) {
			t.Errorf("rule: Params of %s has the kernel's %d parameters; got %v", k.k.Name(), len(k.sizes), params)
			continue
		}
		for i, p := range params {
			if p.Size != k.sizes[i] {
				t.Errorf("rule: Params of %s: parameter %d is %d bytes; got %v", k.k.Name(), i, k.sizes[i], params)
			}
		}
	}

	for _, n := range launchSizes {
		t.Run(fmt.Sprint("n=", n), func(t *testing.T) {
			a, b := inputs(n, n)
			pa, pb := e.upload(t, a), e.upload(t, b)
			pc := e.malloc(t, uint64(4*n+4)) // one element more: the guard must leave it alone
			must(t, "Memset", d.Memset(pc, 0xff, uint64(4*n+4), nil))
			args, err := driver.ArgsOf(pa, pb, pc, int32(n))
			must(t, "ArgsOf", err)
			must(t, "Launch of vector_add", add.Launch(nil, grid1D(n), args))
			got := e.download(t, pc, n+1)
			want := make([]float32, n)
			for i := range want {
				want[i] = a[i] + b[i]
			}
			if i := firstDiff(got, want); i >= 0 {
				t.Fatalf("rule: vector_add computes c[i] = a[i] + b[i]: c[%d] = %v, want %v", i, got[i], want[i])
			}
			if math.Float32bits(got[n]) != 0xffffffff {
				t.Errorf("rule: threads with i >= n write nothing: the element after c[n-1] changed to %v", got[n])
			}

			must(t, "Launch of scale", scale.Launch(nil, grid1D(n), new(driver.Args).Ptr(pa).Float32(-1.5).Int32(int32(n))))
			got = e.download(t, pa, n)
			for i := range want {
				want[i] = a[i] * -1.5
			}
			if i := firstDiff(got, want); i >= 0 {
				t.Fatalf("rule: scale computes x[i] *= s in place: x[%d] = %v, want %v", i, got[i], want[i])
			}

			out := e.malloc(t, 4)
			must(t, "Memset", d.Memset(out, 0, 4, nil))
			must(t, "Launch of reduce_sum", sum.Launch(nil, grid1D(n), new(driver.Args).Ptr(pb).Ptr(out).Int32(int32(n))))
			var host float32
			for _, v := range b {
				host += v
			}
			if got := e.download(t, out, 1)[0]; got != host {
				t.Errorf("rule: reduce_sum adds every x[i] into *out: got %v, want %v", got, host)
			}
		})
	}

	t.Run("ZeroGridIsOne", func(t *testing.T) {
		const n = 100
		a, b := inputs(n, 3)
		pa, pb := e.upload(t, a), e.upload(t, b)
		pc := e.malloc(t, 4*n)
		must(t, "Launch with a zero grid (1 block)", add.Launch(nil, driver.LaunchConfig{Block: driver.Dim3{X: n}}, new(driver.Args).Ptr(pa).Ptr(pb).Ptr(pc).Int32(n)))
		got := e.download(t, pc, n)
		for i := range n {
			if got[i] != a[i]+b[i] {
				t.Fatalf("rule: a zero Dim3 component means 1 (a zero grid is one block): c[%d] = %v, want %v", i, got[i], a[i]+b[i])
			}
		}
		must(t, "Launch with a zero block (1 thread)", scale.Launch(nil, driver.LaunchConfig{Grid: driver.Dim3{X: 2}}, new(driver.Args).Ptr(pc).Float32(2).Int32(n)))
		got = e.download(t, pc, n)
		for i := range n {
			want := a[i] + b[i]
			if i < 2 {
				want *= 2
			}
			if got[i] != want {
				t.Fatalf("rule: a zero block is one thread: after scaling 2 blocks of 1 thread, x[%d] = %v, want %v", i, got[i], want)
			}
		}
	})

	t.Run("ArgsReused", func(t *testing.T) {
		// One Args, repacked between launches queued before either runs:
		// Launch copies what it needs before it returns.
		const n = 3*blockSize + 7
		x, y := inputs(n, 5)
		px, py := e.upload(t, x), e.upload(t, y)
		s := e.stream(t)
		var args driver.Args
		for range 2 {
			args.Reset()
			must(t, "Launch of scale", scale.Launch(s, grid1D(n), args.Ptr(px).Float32(2).Int32(n)))
		}
		args.Reset()
		must(t, "Launch of scale", scale.Launch(s, grid1D(n), args.Ptr(py).Float32(3).Int32(n)))
		args.Reset()
		args.Ptr(px).Float32(100).Int32(n) // repacked after the last launch: must not reach it
		must(t, "Synchronize", s.Synchronize())
		gx, gy := e.download(t, px, n), e.download(t, py, n)
		for i := range n {
			if gx[i] != x[i]*4 || gy[i] != y[i]*3 {
				t.Fatalf("rule: Launch copies its Args: reusing one Args across launches gave x[%d] = %v (want %v), y[%d] = %v (want %v)",
					i, gx[i], x[i]*4, i, gy[i], y[i]*3)
			}
		}
	})

	t.Run("StreamOrder", func(t *testing.T) { testLaunchOrder(t, e, add, sum) })
	t.Run("Refused", func(t *testing.T) { testLaunchRefused(t, e, l, m, add) })
	t.Run("Unload", func(t *testing.T) { testUnload(t, e, l) })
}

// testLaunchOrder checks that launches keep stream order with async copies
// and memsets on one non-default stream, and across streams through an
// event.
func testLaunchOrder(t *testing.T, e *env, add, sum driver.Kernel) {
	d := e.dev
	const n = 1 << 18 // 1 MiB per vector: copies long enough on a GPU that a missed order shows
	a, b := inputs(n, 9)
	ha, hb, hc := e.host(t, 4*n), e.host(t, 4*n), e.host(t, 4*n)
	putFloats(ha.Bytes(), a)
	putFloats(hb.Bytes(), b)
	pa, pb, pc := e.malloc(t, 4*n), e.malloc(t, 4*n), e.malloc(t, 4*n)
	s := e.stream(t)
	must(t, "CopyHtoD", d.CopyHtoD(pa, ha.Bytes(), s))
	must(t, "CopyHtoD", d.CopyHtoD(pb, hb.Bytes(), s))
	must(t, "Launch of vector_add on a stream", add.Launch(s, grid1D(n), new(driver.Args).Ptr(pa).Ptr(pb).Ptr(pc).Int32(n)))
	must(t, "CopyDtoH", d.CopyDtoH(hc.Bytes(), pc, s))
	must(t, "Synchronize", s.Synchronize())
	got := getFloats(hc.Bytes(), n)
	for i := range n {
		if got[i] != a[i]+b[i] {
			t.Fatalf("rule: a launch runs after the copies queued before it on its stream and before the copies queued after: c[%d] = %v, want %v", i, got[i], a[i]+b[i])
		}
	}

	// Across streams: s1 uploads and records; s2 waits, reduces, downloads.
	s1, s2 := e.stream(t), e.stream(t)
	ev := e.event(t)
	out := e.malloc(t, 4)
	putFloats(ha.Bytes(), b)
	must(t, "Memset on s1", d.Memset(out, 0, 4, s1))
	must(t, "CopyHtoD on s1", d.CopyHtoD(pa, ha.Bytes(), s1))
	must(t, "Event.Record on s1", ev.Record(s1))
	must(t, "WaitEvent on s2", s2.WaitEvent(ev))
	must(t, "Launch of reduce_sum on s2", sum.Launch(s2, grid1D(n), new(driver.Args).Ptr(pa).Ptr(out).Int32(n)))
	must(t, "CopyDtoH on s2", d.CopyDtoH(hc.Bytes()[:4], out, s2))
	must(t, "Synchronize s2", s2.Synchronize())
	var want float32
	for _, v := range b {
		want += v
	}
	if got := getFloats(hc.Bytes(), 1)[0]; got != want {
		t.Errorf("rule: a launch after WaitEvent runs after the work the event recorded on another stream: sum = %v, want %v", got, want)
	}
	must(t, "Synchronize s1", s1.Synchronize())
}

// testLaunchRefused checks the launches and loads refused before anything
// is queued, and that the stream stays healthy after them.
func testLaunchRefused(t *testing.T, e *env, l driver.Launcher, m driver.Module, add driver.Kernel) {
	d := e.dev
	_, err := m.Kernel("accelkit_no_such_kernel")
	mustIs(t, "Module.Kernel of a name the image does not have is ErrNotFound", err, driver.ErrNotFound)
	for _, junk := range [][]byte{nil, []byte("not a program image"), {0x7f, 'E', 'L'}} {
		_, err := l.LoadModule(junk)
		mustIs(t, fmt.Sprintf("LoadModule(%q) is ErrInvalidImage", junk), err, driver.ErrInvalidImage)
	}

	const n = 64
	a, b := inputs(n, 1)
	pa, pb := e.upload(t, a), e.upload(t, b)
	pc := e.malloc(t, 4*n)
	must(t, "Memset", d.Memset(pc, 0x7f, 4*n, nil))
	s := e.stream(t)
	cfg := grid1D(n)
	refused := []struct {
		rule string
		cfg  driver.LaunchConfig
		args *driver.Args
		need bool // the rule holds only where Params is known
	}{
		{"a block of more than 1024 threads is ErrInvalidValue", driver.LaunchConfig{Block: driver.Dim3{X: 1024, Y: 2}}, new(driver.Args).Ptr(pa).Ptr(pb).Ptr(pc).Int32(n), false},
		{"1 GiB of dynamic shared memory is ErrInvalidValue", driver.LaunchConfig{Block: driver.Dim3{X: 64}, SharedMem: 1 << 30}, new(driver.Args).Ptr(pa).Ptr(pb).Ptr(pc).Int32(n), false},
		{"too few arguments is ErrInvalidValue", cfg, new(driver.Args).Ptr(pa).Ptr(pb).Ptr(pc), true},
		{"too many arguments is ErrInvalidValue", cfg, new(driver.Args).Ptr(pa).Ptr(pb).Ptr(pc).Int32(n).Int32(n), true},
		{"an argument of the wrong size (int64 for int) is ErrInvalidValue", cfg, new(driver.Args).Ptr(pa).Ptr(pb).Ptr(pc).Int64(n), true},
		{"nil Args for a kernel with parameters is ErrInvalidValue", cfg, nil, true},
	}
	_, known := add.Params()
	for _, r := range refused {
		if r.need && !known {
			continue
		}
		mustIs(t, r.rule, add.Launch(s, r.cfg, r.args), driver.ErrInvalidValue)
	}
	must(t, "a refused launch leaves its stream healthy: Synchronize", s.Synchronize())
	for i, v := range e.download(t, pc, n) {
		if math.Float32bits(v) != 0x7f7f7f7f {
			t.Fatalf("rule: a refused launch queues nothing: c[%d] changed to %v", i, v)
		}
	}
	must(t, "a launch after refused ones", add.Launch(s, cfg, new(driver.Args).Ptr(pa).Ptr(pb).Ptr(pc).Int32(n)))
	must(t, "Synchronize", s.Synchronize())
	if got := e.download(t, pc, n); got[n-1] != a[n-1]+b[n-1] {
		t.Errorf("rule: a stream takes launches after refused ones: c[%d] = %v, want %v", n-1, got[n-1], a[n-1]+b[n-1])
	}
}

// testUnload checks that Unload lets queued work finish, refuses later
// launches, and is idempotent.
func testUnload(t *testing.T, e *env, l driver.Launcher) {
	m, err := l.LoadModule([]byte(KernelPTX))
	must(t, "LoadModule", err)
	k := refKernel(t, m, KernelScale)
	const n = 1 << 18
	x, _ := inputs(n, 2)
	px := e.upload(t, x)
	s := e.stream(t)
	for range 4 {
		must(t, "Launch of scale", k.Launch(s, grid1D(n), new(driver.Args).Ptr(px).Float32(2).Int32(n)))
	}
	must(t, "Unload with launches queued", m.Unload())
	must(t, "Unload is idempotent: a second call returns nil", m.Unload())
	mustIs(t, "Launch of a kernel of an unloaded module is ErrInvalidValue", k.Launch(s, grid1D(n), new(driver.Args).Ptr(px).Float32(2).Int32(n)), driver.ErrInvalidValue)
	must(t, "work queued before Unload completes: Synchronize", s.Synchronize())
	got := e.download(t, px, n)
	for i := range n {
		if got[i] != x[i]*16 {
			t.Fatalf("rule: launches queued before Unload run: x[%d] = %v, want %v", i, got[i], x[i]*16)
		}
	}
}

// testLaunchClosed checks LoadModule and Launch after Driver.Close.
func testLaunchClosed(t *testing.T, e *env) {
	l := launcher(t, e)
	m, err := l.LoadModule([]byte(KernelPTX))
	must(t, "LoadModule", err)
	k := refKernel(t, m, KernelScale)
	p, err := e.dev.Malloc(4)
	must(t, "Malloc", err)
	must(t, "Close", e.drv.Close())
	e.closed = true
	_, err = l.LoadModule([]byte(KernelPTX))
	mustIs(t, "LoadModule after Close is ErrClosed", err, driver.ErrClosed)
	mustIs(t, "Launch after Close is ErrClosed", k.Launch(nil, driver.LaunchConfig{}, new(driver.Args).Ptr(p).Float32(1).Int32(1)), driver.ErrClosed)
}

// testLaunchFault launches accelkit_fault, which traps: the launch fails
// when it runs, the failure is sticky on its stream, and the device is
// lost. A lost CUDA context stays lost for the process, so the rule runs
// only on a device the suite may poison: one that offers Faults, as test
// backends do.
func testLaunchFault(t *testing.T, e *env) {
	faults(t, e)
	l := launcher(t, e)
	d := e.dev
	m := refModule(t, l)
	k := refKernel(t, m, KernelFault)
	p := e.malloc(t, 4096)
	s := e.stream(t)
	other := e.stream(t)
	err := k.Launch(s, driver.LaunchConfig{Block: driver.Dim3{X: 32}}, new(driver.Args).Ptr(p))
	if err != nil {
		// A backend may see the fault at once; it must still be the loss.
		mustIs(t, "a faulting kernel fails with ErrDeviceLost", err, driver.ErrDeviceLost)
	}
	err = s.Synchronize()
	mustIs(t, "a kernel that faults fails its stream with ErrDeviceLost", err, driver.ErrDeviceLost)
	mustIs(t, "the fault is sticky on its stream", s.Synchronize(), driver.ErrDeviceLost)
	_, err = d.Malloc(4096)
	mustIs(t, "after a kernel fault the device is lost: Malloc is ErrDeviceLost", err, driver.ErrDeviceLost)
	mustIs(t, "after a kernel fault the device is lost: other streams are ErrDeviceLost", other.Synchronize(), driver.ErrDeviceLost)
	_, err = l.LoadModule([]byte(KernelPTX))
	mustIs(t, "after a kernel fault LoadModule is ErrDeviceLost", err, driver.ErrDeviceLost)
	if !errors.Is(d.Synchronize(), driver.ErrDeviceLost) {
		t.Error("rule: after a kernel fault Device.Synchronize is ErrDeviceLost")
	}
}
