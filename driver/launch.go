package driver

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
)

// ImageKind is the format of a program image given to Launcher.LoadModule.
type ImageKind int

// Image kinds. DetectImage tells them apart by content, as the CUDA driver
// does.
const (
	ImageUnknown ImageKind = iota
	ImagePTX               // PTX assembly text, compiled by the driver's JIT at load
	ImageCubin             // an ELF object for one architecture
	ImageFatbin            // a fat binary: cubins and PTX for several architectures
)

// String names the kind as CUDA tools do: "ptx", "cubin", "fatbin".
func (k ImageKind) String() string {
	switch k {
	case ImagePTX:
		return "ptx"
	case ImageCubin:
		return "cubin"
	case ImageFatbin:
		return "fatbin"
	}
	return "unknown"
}

// fatbinMagic is the little-endian first word of a fat binary (fatbinary.h's
// FATBIN_MAGIC, 0xBA55ED50).
const fatbinMagic = 0xBA55ED50

// DetectImage reports the format of image: an ELF header is a cubin, the fat
// binary magic a fatbin, and text with a PTX ".version" or ".entry"
// directive and no NUL before its end PTX. Anything else is ImageUnknown,
// which LoadModule refuses with ErrInvalidImage.
func DetectImage(image []byte) ImageKind {
	switch {
	case len(image) >= 4 && bytes.Equal(image[:4], []byte("\x7fELF")):
		return ImageCubin
	case len(image) >= 4 && binary.LittleEndian.Uint32(image) == fatbinMagic:
		return ImageFatbin
	}
	// PTX is text; the driver reads it as a C string, so a NUL ends it and
	// anything after one is not PTX.
	text := image
	if i := bytes.IndexByte(text, 0); i >= 0 {
		if len(bytes.Trim(text[i:], "\x00")) != 0 {
			return ImageUnknown
		}
		text = text[:i]
	}
	if bytes.Contains(text, []byte(".version")) || bytes.Contains(text, []byte(".entry")) {
		return ImagePTX
	}
	return ImageUnknown
}

// Launcher is the optional capability of loading program images and
// launching their kernels: CUDA's cuLibraryLoadData (cuModuleLoadDataEx
// before CUDA 12) and cuLaunchKernel; the sim's kernels registered as Go
// functions. A backend offers it through backendkit.Compose; find it with
// AsLauncher.
type Launcher interface {
	// LoadModule loads a program image (DetectImage's kinds) and returns
	// the module. An image the backend cannot load (not an image, PTX for
	// a newer ISA, a cubin for another architecture) is ErrInvalidImage,
	// and the error carries the backend's log where it gives one; after
	// Driver.Close, ErrClosed. The module does not keep image.
	LoadModule(image []byte) (Module, error)
}

// Module is a loaded program image. Safe for concurrent use.
type Module interface {
	// Kernel returns the kernel named name: the name in the image, which
	// for C++ is the lowered (mangled) name that NVRTC's name expressions
	// give. A name the image does not have is ErrNotFound. Repeated calls
	// may return the same Kernel.
	Kernel(name string) (Kernel, error)
	// Unload releases the module after the work already queued with its
	// kernels; later launches of its kernels fail with ErrInvalidValue.
	// Unload is idempotent: a second call returns nil.
	Unload() error
}

// Kernel is one function of a loaded module. Safe for concurrent use.
type Kernel interface {
	// Name is the kernel's name in the image.
	Name() string
	// Params describes the kernel's parameters in order, where the backend
	// knows them (CUDA 12.4's cuFuncGetParamInfo; the PTX signature on the
	// sim); ok is false where it does not, and Launch then passes the
	// arguments unchecked, as cuLaunchKernel does.
	Params() (params []Param, ok bool)
	// Launch queues the kernel on s (nil: the device's default stream)
	// with cfg's grid, block and dynamic shared memory and args as its
	// parameters. A configuration out of range, or args that do not match
	// Params (count or sizes), is ErrInvalidValue before anything is
	// queued. A kernel that faults while it runs is a sticky failure of
	// the stream and, on CUDA, ErrDeviceLost for the whole device, as the
	// driver leaves the context unusable.
	Launch(s Stream, cfg LaunchConfig, args *Args) error
}

// Param is one kernel parameter: its byte offset in the parameter buffer and
// its size.
type Param struct {
	Offset uint32
	Size   uint32
}

// Dim3 is a grid or block size. A zero component means 1, as in CUDA's dim3,
// so Dim3{X: 256} is 256x1x1.
type Dim3 struct{ X, Y, Z uint32 }

// Norm returns d with zero components replaced by 1.
func (d Dim3) Norm() Dim3 {
	if d.X == 0 {
		d.X = 1
	}
	if d.Y == 0 {
		d.Y = 1
	}
	if d.Z == 0 {
		d.Z = 1
	}
	return d
}

// Count is X*Y*Z after Norm.
func (d Dim3) Count() uint64 {
	n := d.Norm()
	return uint64(n.X) * uint64(n.Y) * uint64(n.Z)
}

// String formats d as "XxYxZ" after Norm.
func (d Dim3) String() string {
	n := d.Norm()
	return fmt.Sprintf("%dx%dx%d", n.X, n.Y, n.Z)
}

// LaunchConfig is a launch's geometry.
type LaunchConfig struct {
	Grid  Dim3 // blocks in the grid
	Block Dim3 // threads in a block
	// SharedMem is the dynamic shared memory per block, in bytes.
	SharedMem uint32
}

// Args is a kernel's arguments in order, each stored as the kernel reads it:
// its bytes in the machine's (little-endian) order. The zero value is an
// empty list; Reset empties it and keeps its memory, so a launch loop packs
// its arguments without allocating. An Args is not safe for concurrent
// mutation; Launch copies what it needs before it returns, so the caller may
// reuse the Args at once.
type Args struct {
	buf   []byte   // the values back to back, each at its own offset
	offs  []uint32 // offset of each value in buf
	sizes []uint32
}

// ArgsOf packs vals: each a Ptr, int32, uint32, int64, uint64, float32 or
// float64 (a kernel's int, unsigned, long long, float, double and pointer
// parameters), or a []byte holding a by-value struct's bytes. Go's int and
// uint have no size a kernel can rely on, so they are refused, as is every
// other type, with an error naming the argument and the valid types.
func ArgsOf(vals ...any) (*Args, error) {
	a := new(Args)
	for i, v := range vals {
		switch v := v.(type) {
		case Ptr:
			a.Ptr(v)
		case int32:
			a.Int32(v)
		case uint32:
			a.Uint32(v)
		case int64:
			a.Int64(v)
		case uint64:
			a.Uint64(v)
		case float32:
			a.Float32(v)
		case float64:
			a.Float64(v)
		case []byte:
			a.Bytes(v)
		case int, uint:
			return nil, fmt.Errorf("driver: kernel argument %d is a Go %T, whose size a kernel cannot know: convert it to int32 (C int) or int64 (C long long): %w", i, v, ErrInvalidValue)
		default:
			return nil, fmt.Errorf("driver: kernel argument %d has type %T; valid types are driver.Ptr, int32, uint32, int64, uint64, float32, float64 and []byte (a struct's bytes): %w", i, v, ErrInvalidValue)
		}
	}
	return a, nil
}

// Reset empties a, keeping its memory for the next arguments.
func (a *Args) Reset() {
	a.buf, a.offs, a.sizes = a.buf[:0], a.offs[:0], a.sizes[:0]
}

// Len is the number of arguments.
func (a *Args) Len() int {
	if a == nil {
		return 0
	}
	return len(a.offs)
}

// Arg returns the bytes of argument i, in [0, Len). The slice aliases a.
func (a *Args) Arg(i int) []byte {
	return a.buf[a.offs[i] : a.offs[i]+a.sizes[i]]
}

// Buffer returns the packed values and the offset and size of each, for
// backends that hand them to a driver in one call. The slices alias a.
func (a *Args) Buffer() (buf []byte, offs, sizes []uint32) {
	if a == nil {
		return nil, nil, nil
	}
	return a.buf, a.offs, a.sizes
}

// add appends n bytes aligned to align and returns them.
func (a *Args) add(n, align int) []byte {
	off := len(a.buf)
	if r := off % align; r != 0 {
		off += align - r
	}
	for len(a.buf) < off+n {
		a.buf = append(a.buf, 0)
	}
	a.offs = append(a.offs, uint32(off))
	a.sizes = append(a.sizes, uint32(n))
	return a.buf[off : off+n]
}

// Ptr appends a device pointer (8 bytes) and returns a.
func (a *Args) Ptr(p Ptr) *Args { binary.LittleEndian.PutUint64(a.add(8, 8), uint64(p)); return a }

// Int32 appends a C int and returns a.
func (a *Args) Int32(v int32) *Args { return a.Uint32(uint32(v)) }

// Uint32 appends a C unsigned int and returns a.
func (a *Args) Uint32(v uint32) *Args { binary.LittleEndian.PutUint32(a.add(4, 4), v); return a }

// Int64 appends a C long long and returns a.
func (a *Args) Int64(v int64) *Args { return a.Uint64(uint64(v)) }

// Uint64 appends a C unsigned long long and returns a.
func (a *Args) Uint64(v uint64) *Args { binary.LittleEndian.PutUint64(a.add(8, 8), v); return a }

// Float32 appends a C float and returns a.
func (a *Args) Float32(v float32) *Args { return a.Uint32(math.Float32bits(v)) }

// Float64 appends a C double and returns a.
func (a *Args) Float64(v float64) *Args { return a.Uint64(math.Float64bits(v)) }

// Bytes appends a by-value struct given as its bytes (laid out as the
// kernel's struct, padding included) and returns a. It is aligned to 8
// bytes, the widest alignment of the scalar types above.
func (a *Args) Bytes(b []byte) *Args { copy(a.add(len(b), 8), b); return a }

// CheckLaunch is for backends: it checks cfg against the device limits
// given (maxBlock threads per block, maxShared dynamic shared bytes; zero
// skips a limit) and args against params when known, and returns an
// ErrInvalidValue error naming kernel and what is wrong, or nil.
func CheckLaunch(kernel string, cfg LaunchConfig, args *Args, params []Param, paramsKnown bool, maxBlock uint64, maxShared uint32) error {
	if t := cfg.Block.Count(); maxBlock != 0 && t > maxBlock {
		return fmt.Errorf("driver: launch of %s: block %s is %d threads; the device allows at most %d per block: %w", kernel, cfg.Block, t, maxBlock, ErrInvalidValue)
	}
	if maxShared != 0 && cfg.SharedMem > maxShared {
		return fmt.Errorf("driver: launch of %s: %d bytes of dynamic shared memory; the device allows at most %d per block: %w", kernel, cfg.SharedMem, maxShared, ErrInvalidValue)
	}
	if !paramsKnown {
		return nil
	}
	if n := args.Len(); n != len(params) {
		return fmt.Errorf("driver: launch of %s: %d arguments; the kernel has %d parameters: %w", kernel, n, len(params), ErrInvalidValue)
	}
	for i, p := range params {
		if got := uint32(len(args.Arg(i))); got != p.Size {
			return fmt.Errorf("driver: launch of %s: argument %d is %d bytes; parameter %d is %d bytes (a pointer or 64-bit value is 8, int, unsigned and float are 4): %w", kernel, i, got, i, p.Size, ErrInvalidValue)
		}
	}
	return nil
}

// AsLauncher returns d's Launcher capability, if it offers one.
func AsLauncher(d Device) (Launcher, bool) { l, ok := d.(Launcher); return l, ok }
