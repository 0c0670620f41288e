//go:build linux && cgo

package nvrtc

/*
#cgo LDFLAGS: -ldl
#include "shim.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"github.com/accelkit/accelkit/driver"
)

// lib is one dlopened libnvrtc: its entry-point table. It is immutable and
// never unloaded.
type lib struct {
	c    *C.ak_lib
	path string
}

// libs caches loaded libraries by path, so repeated Opens share one handle
// and one table. Version and architectures are asked again on every Open.
var libs struct {
	mu sync.Mutex // guards m
	m  map[string]*lib
}

// Open loads libnvrtc: path when given, else $ACCELKIT_LIBNVRTC, else the
// first of libnvrtc.so.13, libnvrtc.so.12 and libnvrtc.so that the dynamic
// loader finds. It asks the library for its version and its supported
// architectures. A library that cannot be loaded, or lacks an entry point,
// is an error wrapping driver.ErrNotSupported that says what was tried and
// what to install or set. Without cgo, or off Linux, Open always returns
// such an error.
func Open(path string) (*Compiler, error) {
	list, explicit := candidates(path)
	var reasons []string
	for _, p := range list {
		l, err := loadLib(p)
		if err != nil {
			reasons = append(reasons, err.Error())
			continue
		}
		return l.compiler()
	}
	if explicit != "" {
		return nil, fmt.Errorf("nvrtc: cannot load NVRTC from %s: %s (%s): %w",
			explicit, strings.Join(reasons, "; "), installHint, driver.ErrNotSupported)
	}
	return nil, fmt.Errorf("nvrtc: cannot load NVRTC: %s (%s): %w",
		strings.Join(reasons, "; "), installHint, driver.ErrNotSupported)
}

// loadLib returns the library at path, loading it once.
func loadLib(path string) (*lib, error) {
	libs.mu.Lock()
	defer libs.mu.Unlock()
	if l, ok := libs.m[path]; ok {
		return l, nil
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var msg [512]C.char
	var missing C.int
	cl := C.ak_open(cpath, &msg[0], C.size_t(len(msg)), &missing)
	if cl == nil {
		text := C.GoString(&msg[0])
		if missing != 0 {
			return nil, fmt.Errorf("%s has no entry point %s (NVRTC older than 11.2, or not NVRTC)", path, text)
		}
		return nil, errors.New(text)
	}
	l := &lib{c: cl, path: path}
	if libs.m == nil {
		libs.m = map[string]*lib{}
	}
	libs.m[path] = l
	return l, nil
}

// compiler asks the library for its version and architectures.
func (l *lib) compiler() (*Compiler, error) {
	var major, minor C.int
	if r := C.ak_version(l.c, &major, &minor); r != 0 {
		return nil, fmt.Errorf("nvrtc: %s: %w", l.path, l.error("nvrtcVersion", int(r), driver.ErrNotSupported))
	}
	var n C.int
	if r := C.ak_num_archs(l.c, &n); r != 0 {
		return nil, fmt.Errorf("nvrtc: %s: %w", l.path, l.error("nvrtcGetNumSupportedArchs", int(r), driver.ErrNotSupported))
	}
	if n < 0 || n > 4096 {
		return nil, fmt.Errorf("nvrtc: %s: nvrtcGetNumSupportedArchs reported %d architectures: %w", l.path, int(n), driver.ErrNotSupported)
	}
	archs := make([]int, n)
	if n > 0 {
		buf := (*C.int)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(C.int(0)))))
		if buf == nil {
			return nil, fmt.Errorf("nvrtc: %s: %w", l.path, driver.ErrOutOfMemory)
		}
		defer C.free(unsafe.Pointer(buf))
		if r := C.ak_archs(l.c, buf); r != 0 {
			return nil, fmt.Errorf("nvrtc: %s: %w", l.path, l.error("nvrtcGetSupportedArchs", int(r), driver.ErrNotSupported))
		}
		for i, a := range unsafe.Slice(buf, int(n)) {
			archs[i] = int(a)
		}
	}
	slices.Sort(archs)
	archs = slices.Compact(archs)
	return &Compiler{lib: l, path: l.path, major: int(major), minor: int(minor), archs: archs}, nil
}

// errorName is nvrtcGetErrorString of r.
func (l *lib) errorName(r int) string {
	s := C.ak_error_string(l.c, C.nvrtcResult(r))
	if s == nil {
		return "NVRTC_ERROR unknown"
	}
	return C.GoString(s)
}

// error describes a failed NVRTC call other than the compile itself.
func (l *lib) error(op string, r int, sentinel error) *driver.Error {
	if r == C.AK_NVRTC_ERROR_OUT_OF_MEMORY {
		sentinel = driver.ErrOutOfMemory
	}
	return &driver.Error{Op: op, Code: r, Name: l.errorName(r), Err: sentinel}
}

// cStrings copies ss into one C array of C strings; free releases all.
func cStrings(ss []string) (arr **C.char, free func()) {
	if len(ss) == 0 {
		return nil, func() {}
	}
	p := (**C.char)(C.calloc(C.size_t(len(ss)), C.size_t(unsafe.Sizeof((*C.char)(nil)))))
	if p == nil {
		panic("nvrtc: out of C memory")
	}
	s := unsafe.Slice(p, len(ss))
	for i, v := range ss {
		s[i] = C.CString(v)
	}
	return p, func() {
		for _, c := range s {
			C.free(unsafe.Pointer(c))
		}
		C.free(unsafe.Pointer(p))
	}
}

// stageOps name the call that failed at each stage of ak_compile.
var stageOps = map[C.int]string{
	C.AK_ST_CREATE:   "nvrtcCreateProgram",
	C.AK_ST_ADD_NAME: "nvrtcAddNameExpression",
	C.AK_ST_FLOW:     "nvrtcSetFlowCallback",
	C.AK_ST_LOG:      "nvrtcGetProgramLog",
	C.AK_ST_CODE:     "nvrtcGetPTX",
	C.AK_ST_LOWERED:  "nvrtcGetLoweredName",
	C.AK_ST_DESTROY:  "nvrtcDestroyProgram",
}

func (l *lib) compile(ctx context.Context, src []byte, name string, a arch, opts Options) (*Result, error) {
	csrc := C.CString(string(src))
	defer C.free(unsafe.Pointer(csrc))
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))

	hsrc := make([]string, len(opts.Headers))
	hname := make([]string, len(opts.Headers))
	for i, h := range opts.Headers {
		hsrc[i], hname[i] = h.Source, h.Name
	}
	chsrc, freeH := cStrings(hsrc)
	defer freeH()
	chname, freeN := cStrings(hname)
	defer freeN()
	copts, freeO := cStrings(append([]string{"-arch=" + a.String()}, opts.Flags...))
	defer freeO()
	names := uniqueNames(opts.NameExpressions)
	cnames, freeE := cStrings(names)
	defer freeE()

	// The cancel flag lives in C memory: the flow callback reads it during
	// nvrtcCompileProgram, and Go writes it from the AfterFunc goroutine.
	flag := (*C.int)(C.calloc(1, C.size_t(unsafe.Sizeof(C.int(0)))))
	if flag == nil {
		return nil, fmt.Errorf("nvrtc: %w", driver.ErrOutOfMemory)
	}
	var cancelled sync.WaitGroup
	cancelled.Add(1)
	stop := context.AfterFunc(ctx, func() {
		defer cancelled.Done()
		C.ak_cancel(flag)
	})
	defer func() {
		// Free the flag only once the AfterFunc can no longer touch it.
		if !stop() {
			cancelled.Wait()
		}
		C.free(unsafe.Pointer(flag))
	}()

	cubin := C.int(0)
	if !a.virtual {
		cubin = 1
	}
	var res C.ak_result
	stage := C.ak_compile(l.c, csrc, cname, C.int(len(hsrc)), chsrc, chname,
		C.int(len(opts.Flags)+1), copts, C.int(len(names)), cnames, cubin, flag, &res)
	defer C.ak_result_free(&res, C.int(len(names)))

	var log string
	if res.log != nil {
		log = C.GoString(res.log)
	}
	switch stage {
	case C.AK_ST_NONE:
	case C.AK_ST_COMPILE:
		if res.code == C.AK_NVRTC_ERROR_CANCELLED && ctx.Err() != nil {
			return nil, fmt.Errorf("nvrtc: compile of %s for %s cancelled: %w", name, a, context.Cause(ctx))
		}
		return nil, &CompileError{Program: name, Arch: opts.Arch, Log: log, Code: int(res.code), Name: l.errorName(int(res.code))}
	case C.AK_ST_NOMEM:
		return nil, fmt.Errorf("nvrtc: compile of %s for %s: %w", name, a, driver.ErrOutOfMemory)
	default:
		op := stageOps[stage]
		if stage == C.AK_ST_CODE && cubin != 0 {
			op = "nvrtcGetCUBIN"
		}
		if stage == C.AK_ST_ADD_NAME || stage == C.AK_ST_LOWERED {
			op = fmt.Sprintf("%s(%q)", op, names[res.failed_name])
		}
		return nil, fmt.Errorf("nvrtc: compile of %s for %s: %w", name, a, l.error(op, int(res.code), ErrCompile))
	}

	r := &Result{Log: log, Kind: driver.ImagePTX}
	if cubin != 0 {
		r.Kind = driver.ImageCubin
	}
	if res.image_len == 0 {
		return nil, fmt.Errorf("nvrtc: compile of %s for %s succeeded but NVRTC returned an empty image: %w", name, a, ErrCompile)
	}
	r.Code = C.GoBytes(unsafe.Pointer(res.image), C.int(res.image_len))
	if len(names) > 0 {
		lowered := unsafe.Slice(res.lowered, len(names))
		r.Lowered = make(map[string]string, len(names))
		for i, n := range names {
			r.Lowered[n] = C.GoString(lowered[i])
		}
	}
	return r, nil
}

// uniqueNames drops repeated name expressions, keeping the first.
func uniqueNames(names []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}
