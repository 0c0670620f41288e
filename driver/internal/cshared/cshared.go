//go:build linux && cgo

// Package cshared builds the driver module's fake C libraries (the fake
// libcuda of cuda/cudatest, the fake libnvrtc of nvrtc/nvrtctest) for
// tests.
//
// A Source is compiled once per process with the system C compiler ($CC,
// else cc) and its object kept in memory, so that no file outlives the test
// that linked it. Link writes the object and a fresh shared library into
// the test's temporary directory on every call: each library is its own
// file without a soname, so each call gives an independent instance (its
// own state, counters and injected faults) inside one test process. Load
// dlopens such a library in this process; a cgo caller that dlopens the
// same path later gets the same handle, and so the same instance.
package cshared

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>

static void *cs_open(const char *path) { return dlopen(path, RTLD_NOW | RTLD_LOCAL); }
static const char *cs_error(void) { return dlerror(); }
static void *cs_sym(void *h, const char *name) { return dlsym(h, name); }
*/
import "C"

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

// Source is one C source to build libraries from. Set its fields before
// the first Link and leave them; Link and Load are then safe for concurrent
// use.
type Source struct {
	Pkg     string   // the package that builds it, to begin messages: "cudatest"
	What    string   // the library, for messages: "the fake libcuda"
	File    string   // the source's base name: "fakecuda" (fakecuda.c, fakecuda.o)
	Lib     string   // the library's file name: "libcuda-fake.so"
	Text    string   // the C source
	CFlags  []string // compile flags besides -fPIC -fvisibility=hidden -Wall -c
	LDFlags []string // link flags after the object: libraries ("-lpthread")

	once   sync.Once
	object []byte
	skip   string
	err    error
}

// compiler is $CC, else cc.
func compiler() string {
	if cc := os.Getenv("CC"); cc != "" {
		return cc
	}
	return "cc"
}

func (s *Source) compile() {
	cc, err := exec.LookPath(compiler())
	if err != nil {
		s.skip = fmt.Sprintf("%s: no C compiler to build %s (%s): %v", s.Pkg, s.What, compiler(), err)
		return
	}
	dir, err := os.MkdirTemp("", s.File+"-")
	if err != nil {
		s.err = err
		return
	}
	defer os.RemoveAll(dir)
	src := filepath.Join(dir, s.File+".c")
	obj := filepath.Join(dir, s.File+".o")
	if err := os.WriteFile(src, []byte(s.Text), 0o644); err != nil {
		s.err = err
		return
	}
	args := append([]string{"-fPIC", "-fvisibility=hidden", "-Wall", "-c", "-o", obj, src}, s.CFlags...)
	if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		s.err = fmt.Errorf("%s: compiling %s: %w\n%s", s.Pkg, s.What, err, out)
		return
	}
	s.object, s.err = os.ReadFile(obj)
}

// Link links a fresh library from s into tb.TempDir(), without the entry
// points named in omit (a linker version script makes them local), and
// returns its path. It compiles s on the first call. It skips tb when there
// is no C compiler and fails tb when building fails.
func (s *Source) Link(tb testing.TB, omit ...string) string {
	tb.Helper()
	s.once.Do(s.compile)
	if s.skip != "" {
		tb.Skip(s.skip)
	}
	if s.err != nil {
		tb.Fatal(s.err)
	}
	dir := tb.TempDir()
	obj := filepath.Join(dir, s.File+".o")
	if err := os.WriteFile(obj, s.object, 0o644); err != nil {
		tb.Fatal(err)
	}
	lib := filepath.Join(dir, s.Lib)
	args := append([]string{"-shared", "-o", lib, obj}, s.LDFlags...)
	if len(omit) > 0 {
		script := filepath.Join(dir, "omit.map")
		body := "{ global: *; local: " + strings.Join(omit, "; ") + "; };\n"
		if err := os.WriteFile(script, []byte(body), 0o644); err != nil {
			tb.Fatal(err)
		}
		args = append(args, "-Xlinker", "--version-script="+script) // -Wl would split a path at commas
	}
	if out, err := exec.Command(compiler(), args...).CombinedOutput(); err != nil {
		tb.Fatalf("%s: linking %s: %v\n%s", s.Pkg, s.What, err, out)
	}
	return lib
}

// Handle is a library loaded into this process. It is never unloaded.
type Handle struct {
	s *Source
	h unsafe.Pointer
}

// Load dlopens the library at path (one Link made from s) and fails tb when
// it cannot.
func (s *Source) Load(tb testing.TB, path string) Handle {
	tb.Helper()
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	h := C.cs_open(cpath)
	if h == nil {
		tb.Fatalf("%s: loading %s: %s", s.Pkg, s.What, C.GoString(C.cs_error()))
	}
	return Handle{s: s, h: h}
}

// Sym returns the address of the library's symbol name, or nil when it
// has none.
func (h Handle) Sym(name string) unsafe.Pointer {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	return C.cs_sym(h.h, cname)
}

// Syms returns the addresses of the symbols names, and fails tb when the
// library lacks one.
func (h Handle) Syms(tb testing.TB, names ...string) map[string]unsafe.Pointer {
	tb.Helper()
	m := make(map[string]unsafe.Pointer, len(names))
	for _, name := range names {
		f := h.Sym(name)
		if f == nil {
			tb.Fatalf("%s: %s lacks %s", h.s.Pkg, h.s.What, name)
		}
		m[name] = f
	}
	return m
}
