package program_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"log"
	"math"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/drivertest"
	"github.com/accelkit/accelkit/driver/nvrtc"
	"github.com/accelkit/accelkit/driver/sim"
	"github.com/accelkit/accelkit/progcache"
	"github.com/accelkit/accelkit/progcache/program"
)

// precompiled stands in for NVRTC, so the example runs on any machine: it
// "compiles" to the reference kernels' hand-written PTX. On a machine with
// libnvrtc, leave Options.Compiler nil and NVRTC compiles the source.
type precompiled struct{ compiles int }

func (c *precompiled) Compile(ctx context.Context, src []byte, opts nvrtc.Options) (*nvrtc.Result, error) {
	c.compiles++
	return &nvrtc.Result{Code: []byte(drivertest.KernelPTX), Kind: driver.ImagePTX}, nil
}
func (c *precompiled) VersionString() string { return "precompiled 1.0" }
func (c *precompiled) SupportedArchs() []int { return []int{50} }

func Example() {
	ctx := context.Background()
	drv, err := sim.Open("capacity=64MiB")
	if err != nil {
		log.Fatal(err)
	}
	defer drv.Close()
	dev, err := drv.Device(0)
	if err != nil {
		log.Fatal(err)
	}
	// A cache in memory for the example; leave Options.Cache nil for the
	// durable default under the user's cache directory.
	cache, err := progcache.NewMemory(progcache.MemoryOptions{})
	if err != nil {
		log.Fatal(err)
	}
	compiler := &precompiled{}
	l, err := program.New(program.Options{Device: dev, Compiler: compiler, Cache: cache})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	src := program.Source{Name: "kernels.cu", Code: []byte(drivertest.KernelSource)}
	for range 2 {
		p, err := l.Load(ctx, src)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("loaded a %s program; from the cache: %v; compiles: %d\n", p.Kind(), p.FromCache(), compiler.compiles)
		p.Close()
	}

	p, err := l.Load(ctx, src)
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	add, err := p.Kernel("accelkit_vector_add")
	if err != nil {
		log.Fatal(err)
	}
	const n = 4
	a, b, c := mustMalloc(dev, 4*n), mustMalloc(dev, 4*n), mustMalloc(dev, 4*n)
	defer dev.Free(a)
	defer dev.Free(b)
	defer dev.Free(c)
	dev.CopyHtoDSync(a, floats(1, 2, 3, 4))
	dev.CopyHtoDSync(b, floats(10, 20, 30, 40))
	args := new(driver.Args).Ptr(a).Ptr(b).Ptr(c).Int32(n)
	if err := add.Launch(nil, driver.LaunchConfig{Grid: driver.Dim3{X: 1}, Block: driver.Dim3{X: 32}}, args); err != nil {
		log.Fatal(err)
	}
	out := make([]byte, 4*n)
	if err := dev.CopyDtoHSync(out, c); err != nil {
		log.Fatal(err)
	}
	for i := range n {
		fmt.Print(math.Float32frombits(binary.LittleEndian.Uint32(out[4*i:])), " ")
	}
	fmt.Println()
	// Output:
	// loaded a ptx program; from the cache: false; compiles: 1
	// loaded a ptx program; from the cache: true; compiles: 1
	// 11 22 33 44
}

func mustMalloc(dev driver.Device, n uint64) driver.Ptr {
	p, err := dev.Malloc(n)
	if err != nil {
		log.Fatal(err)
	}
	return p
}

func floats(vs ...float32) []byte {
	b := make([]byte, 4*len(vs))
	for i, v := range vs {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}
