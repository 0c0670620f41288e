package program

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/nvrtc"
	"github.com/accelkit/accelkit/progcache"
	"github.com/accelkit/accelkit/progcache/filestream"
)

// Compiler compiles CUDA C++ for a Loader. *nvrtc.Compiler is one; a
// stand-in of your own (a remote compile service, precompiled images) can
// be another. Its methods must be safe for concurrent use.
type Compiler interface {
	// Compile compiles src for opts.Arch: a cubin for sm_XX, PTX for
	// compute_XX. A failed compile is an error; *nvrtc.CompileError
	// carries NVRTC's log.
	Compile(ctx context.Context, src []byte, opts nvrtc.Options) (*nvrtc.Result, error)
	// VersionString is the compiler's version, such as "13.0": the "nvrtc"
	// component of every key. An empty one is keyed as unavailable.
	VersionString() string
	// SupportedArchs lists the architectures the compiler targets, such as
	// 75 for sm_75. Load picks the sim's PTX target from it.
	SupportedArchs() []int
}

// Options configure a Loader.
type Options struct {
	// Device is where programs are loaded and their kernels run. It must
	// offer driver.Launcher (CUDA and the sim do). Required.
	Device driver.Device
	// Compiler compiles on a miss. Nil opens NVRTC (nvrtc.Open("")):
	// $ACCELKIT_LIBNVRTC, else the system's libnvrtc.
	Compiler Compiler
	// Cache keeps the compiled programs. Nil opens the durable default: a
	// progcache/filestream cache in DefaultDir capped at DefaultMaxBytes,
	// which Loader.Close closes. A cache you give stays yours: Close leaves
	// it open. Any progcache.Cache that is progcache.Grouped works
	// (filestream, bolt, Memory, a progcache/tiered Cache in front of a
	// Redis tier); its capabilities decide how widely a miss compiles
	// once: in the process, across processes (filestream), across machines
	// (tiered with a lease service).
	Cache progcache.Cache
}

// Source is one program to load: CUDA C++ and how to compile it.
type Source struct {
	// Name is the program's name as NVRTC sees it (in its log and
	// __FILE__); "" is "program.cu". A name with a directory part needs an
	// ExtraDigest, as progcache.MakeKey says.
	Name string
	// Code is the CUDA C++ source.
	Code []byte
	// Options are the compile options. Options.Arch "" means the
	// device's: sm_XY for compute capability X.Y (a cubin); on the sim,
	// which runs PTX, compute_XX for the lowest architecture the compiler
	// supports. The other fields become NVRTC flags: Std --std, Defines
	// --define-macro and --undefine-macro, IncludePaths --include-path,
	// PreIncludes --pre-include, Debug --device-debug, LineInfo
	// --generate-line-info, FastMath --use_fast_math, Relocatable
	// --relocatable-device-code=true, MaxRegisters --maxrregcount, and
	// Extra verbatim after them (an architecture there is refused: use
	// Arch).
	Options progcache.Options
	// NameExpressions are C++ names (such as "axpy<float>") whose lowered
	// names Program.Kernel looks up. They are stored with the program, so
	// a cache hit resolves them as a compile does.
	NameExpressions []string
	// Headers are in-memory headers the source includes by name; they are
	// part of the key.
	Headers []nvrtc.Header
	// ExtraDigest fingerprints inputs the key cannot see, such as the
	// headers found through IncludePaths (progcache.KeyInput.ExtraDigest).
	ExtraDigest []byte
}

// Loader compiles, caches and loads programs for one device. It is safe
// for concurrent use: concurrent Loads of one program compile it once.
type Loader struct {
	// Locking: every field is set by New and read-only after; closeOnce
	// makes Close idempotent. Compile-once is the cache's Group.

	dev       driver.Device
	launcher  driver.Launcher
	compiler  Compiler
	cache     progcache.Cache
	ownCache  bool
	driverVer string
	closeOnce sync.Once
	closeErr  error
}

// New returns a Loader for opts.Device. It fails when the device cannot
// load programs (an error wrapping driver.ErrNotSupported), when NVRTC is
// wanted and cannot be opened (nvrtc.Open's error, which says what to
// install), and when the default cache cannot be opened.
func New(opts Options) (*Loader, error) {
	if opts.Device == nil {
		return nil, fmt.Errorf("program: Options.Device is nil: give the device to load programs on: %w", driver.ErrInvalidValue)
	}
	launcher, ok := driver.AsLauncher(opts.Device)
	if !ok {
		return nil, fmt.Errorf("program: device %q (%T) cannot load programs (it offers no driver.Launcher): %w", opts.Device.Name(), opts.Device, driver.ErrNotSupported)
	}
	l := &Loader{dev: opts.Device, launcher: launcher, compiler: opts.Compiler, cache: opts.Cache}
	if l.compiler == nil {
		c, err := nvrtc.Open("")
		if err != nil {
			return nil, fmt.Errorf("program: no compiler given and NVRTC does not open: %w", err)
		}
		l.compiler = c
	}
	if l.cache == nil {
		dir, err := DefaultDir()
		if err != nil {
			return nil, err
		}
		c, err := filestream.Open(dir, filestream.Options{MaxBytes: DefaultMaxBytes})
		if err != nil {
			return nil, fmt.Errorf("program: the default program cache: %w", err)
		}
		l.cache, l.ownCache = c, true
	}
	l.driverVer = driverVersion(opts.Device)
	return l, nil
}

// Cache returns the cache the Loader keeps programs in.
func (l *Loader) Cache() progcache.Cache { return l.cache }

// Close closes the default cache when New opened it; a cache given in
// Options stays open. Programs already loaded stay loaded. Close is
// idempotent.
func (l *Loader) Close() error {
	l.closeOnce.Do(func() {
		if l.ownCache {
			l.closeErr = l.cache.Close()
		}
	})
	return l.closeErr
}

// Key returns the key Load would use for src, and the KeyInput it is made
// of: the source, the resolved options and the toolchain probes.
func (l *Loader) Key(src Source) (progcache.Key, progcache.KeyInput, error) {
	p, err := l.plan(context.Background(), src)
	if err != nil {
		return progcache.Key{}, progcache.KeyInput{}, err
	}
	return p.key, p.in, nil
}

// Load returns src compiled and loaded on the device: from the cache when
// it holds the program's key, else compiled once (however many callers,
// processes or machines miss at once, as far as the cache's capabilities
// reach), stored and loaded. A compile failure is the compiler's error
// (*nvrtc.CompileError with the log, from NVRTC). A cached entry that is
// not a program for this key (another kind, or an image the device
// refuses with driver.ErrInvalidImage) is deleted and compiled again.
func (l *Loader) Load(ctx context.Context, src Source) (*Program, error) {
	p, err := l.plan(ctx, src)
	if err != nil {
		return nil, err
	}
	var compiled atomic.Bool
	compile := func(ctx context.Context) (progcache.Object, error) {
		compiled.Store(true)
		return l.compile(ctx, p)
	}
	for attempt := 0; ; attempt++ {
		obj, err := progcache.GetOrCompile(ctx, l.cache, p.key, compile)
		if err != nil && obj.Code == nil {
			return nil, err
		}
		// err with an object: compiled but not stored (a Put failure that
		// is not CannotStore). The program still loads; the error is kept.
		putErr := err
		prog, err := l.load(p, obj, !compiled.Load())
		if err == nil {
			if putErr != nil {
				prog.Close()
				return nil, fmt.Errorf("program: %s compiled but not cached: %w", p.opts.Name, putErr)
			}
			return prog, nil
		}
		if compiled.Load() || attempt > 0 || !errors.Is(err, errDamaged) {
			return nil, err
		}
		// A damaged entry: set it aside and compile again, once.
		if derr := l.cache.Delete(ctx, p.key); derr != nil {
			return nil, fmt.Errorf("%w (and deleting the entry failed: %v)", err, derr)
		}
	}
}

// errDamaged marks a cached entry that cannot be this key's program.
var errDamaged = errors.New("program: damaged cache entry")

// compile runs the compiler for p and returns the object to cache.
func (l *Loader) compile(ctx context.Context, p *plan) (progcache.Object, error) {
	res, err := l.compiler.Compile(ctx, p.code, p.opts)
	if err != nil {
		return progcache.Object{}, fmt.Errorf("program: compile %s for %s: %w", p.opts.Name, p.arch, err)
	}
	if res == nil || len(res.Code) == 0 {
		return progcache.Object{}, fmt.Errorf("program: compile %s for %s: the compiler returned no code", p.opts.Name, p.arch)
	}
	if k := driver.DetectImage(res.Code); k != p.image {
		return progcache.Object{}, fmt.Errorf("program: compile %s for %s: the compiler returned a %s image, want %s: %w", p.opts.Name, p.arch, k, p.image, driver.ErrInvalidImage)
	}
	obj := progcache.Object{Kind: p.image.String(), Name: p.opts.Name, Code: res.Code, Symbols: res.Lowered,
		Metadata: map[string]string{"arch": p.arch}}
	if res.Log != "" {
		obj.Metadata["log"] = res.Log
	}
	return obj, nil
}

// load loads obj on the device. cached says obj came from the cache, so a
// failure to be this key's program is errDamaged.
func (l *Loader) load(p *plan, obj progcache.Object, cached bool) (*Program, error) {
	damaged := func(format string, args ...any) error {
		msg := fmt.Sprintf(format, args...)
		if cached {
			return fmt.Errorf("program: cached entry %s of %s: %s: %w", p.key, p.opts.Name, msg, errDamaged)
		}
		return fmt.Errorf("program: %s: %s: %w", p.opts.Name, msg, driver.ErrInvalidImage)
	}
	if obj.Kind != p.image.String() {
		return nil, damaged("a %q object, want %q", obj.Kind, p.image)
	}
	for _, e := range p.opts.NameExpressions {
		if _, ok := obj.Symbols[e]; !ok {
			return nil, damaged("no lowered name for name expression %q", e)
		}
	}
	mod, err := l.launcher.LoadModule(obj.Code)
	if err != nil {
		if cached && errors.Is(err, driver.ErrInvalidImage) {
			return nil, fmt.Errorf("%w: %w", damaged("the device refuses the image"), err)
		}
		return nil, fmt.Errorf("program: load %s: %w", p.opts.Name, err)
	}
	return &Program{key: p.key, obj: obj, mod: mod, cached: cached}, nil
}

// Program is a program loaded on a device. It is safe for concurrent use.
type Program struct {
	// Locking: the fields are set at Load and read-only after; the module
	// is safe for concurrent use.

	key    progcache.Key
	obj    progcache.Object
	mod    driver.Module
	cached bool
}

// Kernel returns the kernel named name: a name expression given at Load
// (resolved to its lowered name), or a name in the image (an extern "C"
// function's own name). A name the program does not have is an error
// wrapping driver.ErrNotFound.
func (p *Program) Kernel(name string) (driver.Kernel, error) {
	if lowered, ok := p.obj.Symbols[name]; ok {
		name = lowered
	}
	k, err := p.mod.Kernel(name)
	if err != nil {
		return nil, fmt.Errorf("program: kernel %q of %s: %w", name, p.obj.Name, err)
	}
	return k, nil
}

// Lowered returns the lowered name of a name expression given at Load.
func (p *Program) Lowered(expr string) (string, bool) {
	s, ok := p.obj.Symbols[expr]
	return s, ok
}

// Key is the program's cache key.
func (p *Program) Key() progcache.Key { return p.key }

// Kind is the image's format: "cubin" or "ptx".
func (p *Program) Kind() string { return p.obj.Kind }

// FromCache reports whether Load found the program in the cache, or
// another caller's compile (in this process, or another one that shares
// the cache) produced it, rather than compiling it itself.
func (p *Program) FromCache() bool { return p.cached }

// Log is the compiler's log (warnings), kept with the cached program.
func (p *Program) Log() string { return p.obj.Metadata["log"] }

// Close unloads the program after the work already queued with its
// kernels. It is idempotent.
func (p *Program) Close() error { return p.mod.Unload() }
