package sim

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/accelkit/accelkit/driver"
)

// LoadModule loads a PTX module: the sim reads its kernels' names and
// parameters from the text (parameters as the .entry declares them) and
// runs each kernel as the Go function registered under its name
// (RegisterKernel). A cubin, fatbin or anything but PTX text is
// driver.ErrInvalidImage; after Close, driver.ErrClosed.
func (d *Device) LoadModule(image []byte) (driver.Module, error) {
	const op = "LoadModule"
	if err := d.state.Check(op); err != nil {
		return nil, err
	}
	switch kind := driver.DetectImage(image); kind {
	case driver.ImagePTX:
	case driver.ImageCubin, driver.ImageFatbin:
		return nil, fmt.Errorf("sim device %d: %s: a %s image (%d bytes) holds machine code for a GPU; the sim runs PTX text only, its kernels as Go functions registered with sim.RegisterKernel (compile for a virtual architecture, compute_XX, to get PTX): %w",
			d.ordinal, op, kind, len(image), driver.ErrInvalidImage)
	default:
		return nil, fmt.Errorf("sim device %d: %s: %d bytes that are not a program image; the sim loads PTX text (with .version, .target and .entry directives): %w",
			d.ordinal, op, len(image), driver.ErrInvalidImage)
	}
	if i := bytes.IndexByte(image, 0); i >= 0 { // a C string: the NUL ends it
		image = image[:i]
	}
	entries, err := parsePTX(image)
	if err != nil {
		return nil, fmt.Errorf("sim device %d: %s: PTX: %v: %w", d.ordinal, op, err, driver.ErrInvalidImage)
	}
	m := &module{dev: d, entries: map[string][]driver.Param{}, kernels: map[string]*kernel{}}
	for _, e := range entries {
		m.entries[e.name] = e.params
	}
	return m, nil
}

// module is a loaded PTX module.
//
// Locking: mu guards unloaded and kernels; entries and dev are fixed at
// load. A launch holds mu for reading from its check to its enqueue, so
// Unload (which takes it for writing) is ordered with every launch: one
// queued before Unload runs, one after it is refused. Lock order: mu
// before a stream's mu.
type module struct {
	dev     *Device
	entries map[string][]driver.Param // kernel name -> PTX parameters

	mu       sync.RWMutex
	unloaded bool
	kernels  map[string]*kernel
}

// Kernel returns the kernel called name. A name the module has no .entry
// for is driver.ErrNotFound, and so is one without a Go function
// registered (RegisterKernel) at the time of the call.
func (m *module) Kernel(name string) (driver.Kernel, error) {
	d := m.dev
	if err := d.state.Check("Module.Kernel"); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.unloaded {
		return nil, fmt.Errorf("sim device %d: Module.Kernel(%q): the module was unloaded: %w", d.ordinal, name, driver.ErrInvalidValue)
	}
	if k := m.kernels[name]; k != nil {
		return k, nil
	}
	params, ok := m.entries[name]
	if !ok {
		return nil, fmt.Errorf("sim device %d: Module.Kernel(%q): the module has no .entry of that name (it has %s): %w",
			d.ordinal, name, m.names(), driver.ErrNotFound)
	}
	impl, ok := lookupKernel(name)
	if !ok {
		return nil, fmt.Errorf("sim device %d: Module.Kernel(%q): the module declares it, but no Go function implements it: call sim.RegisterKernel(%q, ...) before loading it: %w",
			d.ordinal, name, name, driver.ErrNotFound)
	}
	k := &kernel{mod: m, name: name, params: params, impl: impl}
	if sizes := paramSizes(params); !slices.Equal(sizes, impl.params) {
		k.mismatch = fmt.Errorf("sim device %d: launch of %s: its PTX declares parameters of %v bytes, but the Go function registered with sim.RegisterKernel takes %v: %w",
			d.ordinal, name, sizes, impl.params, driver.ErrInvalidValue)
	}
	m.kernels[name] = k
	return k, nil
}

// names lists the module's kernels for an error.
func (m *module) names() string {
	if len(m.entries) == 0 {
		return "none"
	}
	names := make([]string, 0, len(m.entries))
	for n := range m.entries {
		names = append(names, n)
	}
	slices.Sort(names)
	const most = 8
	if len(names) > most {
		return fmt.Sprintf("%v and %d more", names[:most], len(names)-most)
	}
	return fmt.Sprint(names)
}

// Unload makes later launches of the module's kernels fail with
// driver.ErrInvalidValue; launches queued before it still run. A second
// Unload returns nil; after Close, driver.ErrClosed.
func (m *module) Unload() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.unloaded {
		return nil
	}
	if err := m.dev.state.Check("Module.Unload"); err != nil {
		return err
	}
	m.unloaded = true
	return nil
}

func paramSizes(params []driver.Param) []uint32 {
	sizes := make([]uint32, len(params))
	for i, p := range params {
		sizes[i] = p.Size
	}
	return sizes
}

// kernel is a kernel of a loaded module. Its fields are fixed at creation;
// it is safe for concurrent use.
type kernel struct {
	mod      *module
	name     string
	params   []driver.Param
	impl     kernelImpl
	mismatch error // the PTX and the registered function disagree on the parameters
}

// Name returns the kernel's name in the PTX.
func (k *kernel) Name() string { return k.name }

// Params returns the parameters the PTX declares; ok is always true.
func (k *kernel) Params() ([]driver.Param, bool) { return slices.Clone(k.params), true }

// Launch queues the kernel on s. The configuration is checked against
// MaxThreadsPerBlock, MaxSharedPerBlock and CUDA's grid and block limits,
// args against the PTX parameters, and the PTX parameters against the
// registered function's, all before anything is queued (ErrInvalidValue).
// When the stream reaches it, the kernel's KernelFunc runs every block; a
// fault is the stream's sticky error and loses the device.
func (k *kernel) Launch(s driver.Stream, cfg driver.LaunchConfig, args *driver.Args) error {
	const op = "Launch"
	d := k.mod.dev
	st, err := d.stream(s, op)
	if err != nil {
		return err
	}
	if err := checkDims(k.name, cfg); err != nil {
		return fmt.Errorf("sim device %d: %w", d.ordinal, err)
	}
	if err := driver.CheckLaunch(k.name, cfg, args, k.params, true, MaxThreadsPerBlock, MaxSharedPerBlock); err != nil {
		return fmt.Errorf("sim device %d: %w", d.ordinal, err)
	}
	if k.mismatch != nil {
		return k.mismatch
	}
	if err := d.fault(op, false); err != nil {
		return err
	}
	a := copyArgs(args)
	k.mod.mu.RLock()
	defer k.mod.mu.RUnlock()
	if k.mod.unloaded {
		return fmt.Errorf("sim device %d: launch of %s: its module was unloaded: %w", d.ordinal, k.name, driver.ErrInvalidValue)
	}
	return st.enqueue(op, func() error { return d.runKernel(k, cfg, a) })
}

// checkDims checks cfg's grid and block against CUDA's per-dimension
// limits; CheckLaunch checks the block's total.
func checkDims(name string, cfg driver.LaunchConfig) error {
	g, b := cfg.Grid.Norm(), cfg.Block.Norm()
	switch {
	case g.X > maxGridX || g.Y > maxGridYZ || g.Z > maxGridYZ:
		return fmt.Errorf("launch of %s: grid %s; the device allows at most %dx%dx%d: %w", name, g, maxGridX, maxGridYZ, maxGridYZ, driver.ErrInvalidValue)
	case b.X > maxBlockXY || b.Y > maxBlockXY || b.Z > maxBlockZ:
		return fmt.Errorf("launch of %s: block %s; the device allows at most %dx%dx%d: %w", name, b, maxBlockXY, maxBlockXY, maxBlockZ, driver.ErrInvalidValue)
	}
	return nil
}

// runKernel runs a launch on its stream. A fault loses the device, as a
// failed launch leaves a CUDA context unusable.
func (d *Device) runKernel(k *kernel, cfg driver.LaunchConfig, args launchArgs) error {
	b := &Block{dev: d, kernel: k.name, grid: cfg.Grid.Norm(), block: cfg.Block.Norm(), args: args}
	if cfg.SharedMem > 0 {
		b.shared = make([]byte, cfg.SharedMem)
	}
	err := b.runBlocks(k.impl.fn)
	b.release()
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errStopped):
		return fmt.Errorf("sim device %d: launch of %s stopped: %w", d.ordinal, k.name, d.state.Check("Launch"))
	}
	lost := fmt.Errorf("sim device %d: %v: %w (%w)", d.ordinal, err, ErrKernelFault, driver.ErrDeviceLost)
	d.lose(lost)
	return lost
}
