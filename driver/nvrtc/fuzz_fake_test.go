package nvrtc_test

import (
	"context"
	"errors"
	"testing"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/nvrtc"
	"github.com/accelkit/accelkit/driver/nvrtc/nvrtctest"
)

// FuzzCompileFake feeds arbitrary source and a name expression through
// Compile into the fake, whose C scanner parses them: a compile either
// succeeds with PTX or fails with a *CompileError, never crashes, and never
// leaks a program.
func FuzzCompileFake(f *testing.F) {
	for _, s := range []string{
		kernels,
		"template <typename T, int N> __global__ void k(T* x, const T* __restrict__ y, unsigned n) {}",
		`extern "C" { __global__ void a(float* x) {} __global__ void b(double d) {} }`,
		"__global__ void f(",
		"__global__ int g() {}",
		"#include \"missing.h\"\n",
		"template < __global__ void",
		"/* unterminated",
		"__global__ void h(struct S s) {}",
	} {
		f.Add(s, "k<float, 4>")
	}
	lib := nvrtctest.Build(f)
	c, err := nvrtc.Open(lib.Path)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, src, expr string) {
		opts := nvrtc.Options{Arch: "compute_90"}
		if expr != "" {
			opts.NameExpressions = []string{expr}
		}
		r, err := c.Compile(context.Background(), []byte(src), opts)
		var ce *nvrtc.CompileError
		switch {
		case err == nil:
			if r.Kind != driver.ImagePTX || len(r.Code) == 0 {
				t.Fatalf("success without PTX: %+v", r)
			}
		case errors.As(err, &ce), errors.Is(err, driver.ErrInvalidValue):
		default:
			t.Fatalf("unexpected error: %v", err)
		}
		if live := lib.Count("live_programs"); live != 0 {
			t.Fatalf("%d programs left alive", live)
		}
	})
}
