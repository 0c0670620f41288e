package sim_test

import (
	"encoding/binary"
	"fmt"
	"log"
	"math"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/drivertest"
	"github.com/accelkit/accelkit/driver/sim"
)

// Loading the reference kernels' PTX and running vector_add: the same code
// runs on a GPU through the cuda backend, where the driver JIT-compiles the
// PTX; on the sim a Go function registered under the kernel's name runs it.
func ExampleDevice_LoadModule() {
	drv, err := sim.Open("capacity=64MiB")
	if err != nil {
		log.Fatal(err)
	}
	defer drv.Close()
	dev, _ := drv.Device(0)
	l, ok := driver.AsLauncher(dev)
	if !ok {
		log.Fatal("no launcher")
	}
	mod, err := l.LoadModule([]byte(drivertest.KernelPTX))
	if err != nil {
		log.Fatal(err)
	}
	defer mod.Unload()
	add, err := mod.Kernel("accelkit_vector_add")
	if err != nil {
		log.Fatal(err)
	}

	const n = 1000 // not a multiple of the block: the kernel's i < n guard covers the rest
	host := make([]byte, 4*n)
	for i := range n {
		binary.LittleEndian.PutUint32(host[4*i:], math.Float32bits(float32(i)))
	}
	a, _ := dev.Malloc(4 * n)
	c, _ := dev.Malloc(4 * n)
	defer dev.Free(a)
	defer dev.Free(c)
	if err := dev.CopyHtoDSync(a, host); err != nil {
		log.Fatal(err)
	}
	args, err := driver.ArgsOf(a, a, c, int32(n)) // c = a + a
	if err != nil {
		log.Fatal(err)
	}
	cfg := driver.LaunchConfig{Grid: driver.Dim3{X: (n + 255) / 256}, Block: driver.Dim3{X: 256}}
	if err := add.Launch(nil, cfg, args); err != nil { // nil: the default stream
		log.Fatal(err)
	}
	if err := dev.CopyDtoHSync(host, c); err != nil { // waits for the launch
		log.Fatal(err)
	}
	last := math.Float32frombits(binary.LittleEndian.Uint32(host[4*(n-1):]))
	fmt.Println(cfg.Grid, cfg.Block, last)
	// Output: 4x1x1 256x1x1 1998
}

// A kernel of your own: its Go implementation is registered under the name
// its PTX gives it, typically in an init function; the PTX (from NVRTC for
// compute_XX, or written by hand) declares the parameters.
func ExampleRegisterKernel() {
	drv, _ := sim.Open("capacity=64MiB")
	defer drv.Close()
	dev, _ := drv.Device(0)
	l, _ := driver.AsLauncher(dev)
	mod, err := l.LoadModule([]byte(`.version 7.0
.target sm_50
.address_size 64
.visible .entry example_iota(.param .u64 out, .param .u32 n) { ret; }
`))
	if err != nil {
		log.Fatal(err)
	}
	iota, err := mod.Kernel("example_iota")
	if err != nil {
		log.Fatal(err)
	}
	out, _ := dev.Malloc(4 * 8)
	if err := iota.Launch(nil, driver.LaunchConfig{Grid: driver.Dim3{X: 2}, Block: driver.Dim3{X: 4}}, new(driver.Args).Ptr(out).Uint32(8)); err != nil {
		log.Fatal(err)
	}
	got := make([]byte, 4*8)
	if err := dev.CopyDtoHSync(got, out); err != nil {
		log.Fatal(err)
	}
	vals := make([]float32, 8)
	for i := range vals {
		vals[i] = math.Float32frombits(binary.LittleEndian.Uint32(got[4*i:]))
	}
	fmt.Println(vals)
	// Output: [0 1 2 3 4 5 6 7]
}

func init() {
	// out[i] = i for i < n, i = blockIdx.x*blockDim.x + threadIdx.x.
	err := sim.RegisterKernel("example_iota", []uint32{8, 4}, func(b *sim.Block) error {
		first := b.BlockIdx().X * b.BlockDim().X
		n := b.Uint32(1)
		if first >= n {
			return nil
		}
		count := min(b.BlockDim().X, n-first)
		out, err := b.Float32s(b.Ptr(0)+driver.Ptr(4*first), int(count))
		if err != nil {
			return err // out of bounds: the launch faults
		}
		for t := range out {
			out[t] = float32(first + uint32(t))
		}
		return nil
	})
	if err != nil {
		panic(err)
	}
}
