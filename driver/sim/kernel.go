package sim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/accelkit/accelkit/driver"
)

// ErrKernelFault is wrapped, beside driver.ErrDeviceLost, by the failure of
// a launch whose kernel faulted while it ran: its KernelFunc returned an
// error or panicked, or it touched device memory outside a live
// allocation. On CUDA such a launch fails with CUDA_ERROR_LAUNCH_FAILED or
// CUDA_ERROR_ILLEGAL_ADDRESS and leaves the context unusable, so on the sim
// the device is lost too.
var ErrKernelFault = errors.New("sim: kernel fault")

// Device limits a launch is checked against: those of every CUDA GPU since
// compute capability 2.0 (without opting in to more shared memory).
const (
	MaxThreadsPerBlock = 1024      // threads in one block
	MaxSharedPerBlock  = 48 << 10  // dynamic shared memory per block, bytes
	maxBlockXY         = 1024      // block X and Y
	maxBlockZ          = 64        // block Z
	maxGridX           = 1<<31 - 1 // grid X
	maxGridYZ          = 65535     // grid Y and Z
)

// KernelFunc is the Go implementation of a kernel. The sim calls it once
// per thread block of a launch, in order (X fastest, then Y, then Z), on
// the goroutine running the stream; the function runs the block's threads
// itself, typically as a loop over b.BlockDim(). Blocks of one launch
// never run concurrently, but launches on different streams do, as on a
// GPU, so a kernel that adds into memory other launches may touch uses
// Block.AtomicAddFloat32, as CUDA code uses atomicAdd.
//
// Returning an error is a kernel fault (as PTX's trap), and so is a panic:
// the launch fails, its stream's error is sticky and the device is lost
// (ErrKernelFault, driver.ErrDeviceLost). The Block and the memory views
// it gave must not be kept after the function returns.
type KernelFunc func(b *Block) error

// kernelImpl is a registered kernel.
type kernelImpl struct {
	params []uint32 // parameter sizes in bytes
	fn     KernelFunc
}

// kernels is the process-wide kernel registry.
//
// Locking: mu guards m; an entry never changes once added.
var kernels = struct {
	mu sync.RWMutex
	m  map[string]kernelImpl
}{m: map[string]kernelImpl{}}

// RegisterKernel makes fn the implementation of the kernel called name in
// every PTX module the sim loads, for every driver of the process. params
// are the sizes in bytes of the kernel's parameters in order, as its PTX
// declares them (8 for a pointer, long long and double; 4 for int, unsigned
// and float; a by-value struct's size): a launch of a kernel whose PTX
// signature differs is refused. name is the name in the PTX, the lowered
// (mangled) one for a C++ kernel without extern "C".
//
// A name already registered, an empty or invalid name, a zero parameter
// size and a nil fn are errors wrapping driver.ErrInvalidValue. The sim
// registers the reference kernels of drivertest.KernelPTX itself
// (accelkit_vector_add, accelkit_scale, accelkit_reduce_sum,
// accelkit_fault). Typically called from an init function.
func RegisterKernel(name string, params []uint32, fn KernelFunc) error {
	switch {
	case name == "":
		return fmt.Errorf("sim: RegisterKernel: empty kernel name: %w", driver.ErrInvalidValue)
	case !validIdent(name):
		return fmt.Errorf("sim: RegisterKernel(%q): not a PTX identifier (a letter, or '_', '$' or '%%' and one more character, followed by letters, digits, '_' and '$'): %w", name, driver.ErrInvalidValue)
	case fn == nil:
		return fmt.Errorf("sim: RegisterKernel(%q): nil KernelFunc: %w", name, driver.ErrInvalidValue)
	}
	var total uint64
	for i, p := range params {
		if p == 0 {
			return fmt.Errorf("sim: RegisterKernel(%q): parameter %d has size 0; every parameter takes at least 1 byte: %w", name, i, driver.ErrInvalidValue)
		}
		total += uint64(p)
	}
	if total > maxParamBytes {
		return fmt.Errorf("sim: RegisterKernel(%q): parameters of %d bytes; a kernel takes at most %d: %w", name, total, maxParamBytes, driver.ErrInvalidValue)
	}
	kernels.mu.Lock()
	defer kernels.mu.Unlock()
	if _, dup := kernels.m[name]; dup {
		return fmt.Errorf("sim: RegisterKernel(%q): a kernel of that name is registered already; each name has one implementation per process: %w", name, driver.ErrInvalidValue)
	}
	kernels.m[name] = kernelImpl{params: slices.Clone(params), fn: fn}
	return nil
}

// lookupKernel returns the registered kernel called name.
func lookupKernel(name string) (kernelImpl, bool) {
	kernels.mu.RLock()
	defer kernels.mu.RUnlock()
	k, ok := kernels.m[name]
	return k, ok
}

// launchArgs is a launch's copy of its driver.Args.
type launchArgs struct {
	buf         []byte
	offs, sizes []uint32
}

func copyArgs(a *driver.Args) launchArgs {
	buf, offs, sizes := a.Buffer()
	return launchArgs{slices.Clone(buf), slices.Clone(offs), slices.Clone(sizes)}
}

// Block is one thread block of a launch, as its KernelFunc sees it: the
// launch's geometry, the block's index and dynamic shared memory, the
// arguments, and checked access to the device's memory.
//
// The argument getters take the parameter's index and panic, a kernel
// fault, when the index is out of range or the parameter's size is not the
// getter's. Mem and the views built on it fault the launch when the range
// is not inside a live allocation of the device, even if the function
// goes on to ignore the error, as a GPU would.
//
// A Block is used by one goroutine: the one running its KernelFunc.
type Block struct {
	dev         *Device
	kernel      string
	grid, block driver.Dim3 // normalised
	idx         driver.Dim3
	shared      []byte
	args        launchArgs
	held        []*region // device memory kept mapped for the launch
	fault       error     // the first bad access
}

// GridDim is the launch's grid, zero components replaced by 1 (CUDA's
// gridDim).
func (b *Block) GridDim() driver.Dim3 { return b.grid }

// BlockDim is the launch's block, zero components replaced by 1 (CUDA's
// blockDim).
func (b *Block) BlockDim() driver.Dim3 { return b.block }

// BlockIdx is this block's index in the grid (CUDA's blockIdx).
func (b *Block) BlockIdx() driver.Dim3 { return b.idx }

// Shared is the block's dynamic shared memory: LaunchConfig.SharedMem
// bytes. Its contents at the start of a block are undefined, as on a GPU.
func (b *Block) Shared() []byte { return b.shared }

// NumArgs is the number of arguments of the launch.
func (b *Block) NumArgs() int { return len(b.args.offs) }

// Arg returns the bytes of argument i: a by-value struct's, for instance.
func (b *Block) Arg(i int) []byte {
	if i < 0 || i >= len(b.args.offs) {
		panic(fmt.Sprintf("sim: kernel %s reads argument %d; the launch has %d", b.kernel, i, len(b.args.offs)))
	}
	return b.args.buf[b.args.offs[i] : b.args.offs[i]+b.args.sizes[i]]
}

// arg returns argument i, which must be size bytes.
func (b *Block) arg(i, size int, what string) []byte {
	a := b.Arg(i)
	if len(a) != size {
		panic(fmt.Sprintf("sim: kernel %s reads argument %d as %s (%d bytes); it is %d bytes", b.kernel, i, what, size, len(a)))
	}
	return a
}

// Ptr returns argument i, a device pointer.
func (b *Block) Ptr(i int) driver.Ptr {
	return driver.Ptr(binary.LittleEndian.Uint64(b.arg(i, 8, "a pointer")))
}

// Int32 returns argument i, a C int.
func (b *Block) Int32(i int) int32 { return int32(binary.LittleEndian.Uint32(b.arg(i, 4, "an int32"))) }

// Uint32 returns argument i, a C unsigned int.
func (b *Block) Uint32(i int) uint32 { return binary.LittleEndian.Uint32(b.arg(i, 4, "a uint32")) }

// Int64 returns argument i, a C long long.
func (b *Block) Int64(i int) int64 { return int64(binary.LittleEndian.Uint64(b.arg(i, 8, "an int64"))) }

// Uint64 returns argument i, a C unsigned long long.
func (b *Block) Uint64(i int) uint64 { return binary.LittleEndian.Uint64(b.arg(i, 8, "a uint64")) }

// Float32 returns argument i, a C float.
func (b *Block) Float32(i int) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(b.arg(i, 4, "a float32")))
}

// Float64 returns argument i, a C double.
func (b *Block) Float64(i int) float64 {
	return math.Float64frombits(binary.LittleEndian.Uint64(b.arg(i, 8, "a float64")))
}

// Mem returns the n bytes of device memory at p, which stay mapped until
// the launch ends. A range not inside one live allocation (or mapped VMM
// range with access) of the device is an error, and faults the launch.
func (b *Block) Mem(p driver.Ptr, n uint64) ([]byte, error) {
	if b.fault != nil {
		return nil, b.fault
	}
	if n == 0 {
		return nil, nil
	}
	if b.covered(uint64(p), n) {
		return bytesAt(uint64(p), n), nil
	}
	r, err := b.dev.mem.acquire("kernel access", uint64(p), n)
	if err != nil {
		b.fault = fmt.Errorf("%s: %w", b.where(), err)
		return nil, b.fault
	}
	b.held = append(b.held, r)
	return bytesAt(uint64(p), n), nil
}

// covered reports whether [p, p+n) lies in an allocation the launch holds
// already. Only plain allocations count: a VMM range's access may change
// between two calls, so it is checked each time.
func (b *Block) covered(p, n uint64) bool {
	for _, r := range b.held {
		if r.kind == kindAlloc && p >= r.base && p < r.end() && n <= r.end()-p {
			return true
		}
	}
	return false
}

// Float32s returns the n float32 values of device memory at p, as Mem. A p
// not aligned to 4 bytes faults the launch (a misaligned address on a
// GPU).
func (b *Block) Float32s(p driver.Ptr, n int) ([]float32, error) {
	if b.fault == nil && p%4 != 0 {
		b.fault = fmt.Errorf("%s: float32 access at %v, which is not 4-byte aligned: %w", b.where(), p, driver.ErrInvalidValue)
	}
	if n < 0 {
		return nil, b.setFault(fmt.Errorf("%s: Float32s of %d values: %w", b.where(), n, driver.ErrInvalidValue))
	}
	m, err := b.Mem(p, 4*uint64(n))
	if err != nil || n == 0 {
		return nil, err
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&m[0])), n), nil
}

// AtomicAddFloat32 adds v to the float32 at p atomically, as CUDA's
// atomicAdd, and returns the old value.
func (b *Block) AtomicAddFloat32(p driver.Ptr, v float32) (old float32, err error) {
	f, err := b.Float32s(p, 1)
	if err != nil {
		return 0, err
	}
	word := (*uint32)(unsafe.Pointer(&f[0]))
	for {
		o := atomic.LoadUint32(word)
		if atomic.CompareAndSwapUint32(word, o, math.Float32bits(math.Float32frombits(o)+v)) {
			return math.Float32frombits(o), nil
		}
	}
}

// setFault records err as the launch's fault unless one is recorded, and
// returns the recorded one.
func (b *Block) setFault(err error) error {
	if b.fault == nil {
		b.fault = err
	}
	return b.fault
}

// where names the kernel and block for an error.
func (b *Block) where() string {
	return fmt.Sprintf("kernel %s, block (%d,%d,%d)", b.kernel, b.idx.X, b.idx.Y, b.idx.Z)
}

// errStopped ends a launch whose device was closed or lost while it ran.
var errStopped = errors.New("sim: device closed or lost while the kernel ran")

// release ends the launch's hold on device memory.
func (b *Block) release() {
	for _, r := range b.held {
		b.dev.mem.release(r)
	}
	b.held = nil
}

// runBlocks runs fn for every block of the launch and returns the fault,
// if one happened.
func (b *Block) runBlocks(fn KernelFunc) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%s: panic: %v", b.where(), v)
		}
	}()
	for z := range b.grid.Z {
		for y := range b.grid.Y {
			for x := range b.grid.X {
				if !b.dev.live() { // closed or lost meanwhile: stop, as the GPU would
					return errStopped
				}
				b.idx = driver.Dim3{X: x, Y: y, Z: z}
				if err := fn(b); err != nil {
					return b.setFault(fmt.Errorf("%s: %v", b.where(), err))
				}
				if b.fault != nil {
					return b.fault
				}
			}
		}
	}
	return nil
}
