package nvrtc_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/accelkit/accelkit/driver/nvrtc"
)

// Compile a kernel to a cubin for the device's architecture and find its
// lowered name. Without NVRTC installed, Open says what to install.
func Example() {
	c, err := nvrtc.Open("") // $ACCELKIT_LIBNVRTC, else libnvrtc.so.13, .so.12, libnvrtc.so
	if err != nil {
		log.Fatal(err)
	}
	src := []byte(`
template <typename T>
__global__ void scale(T* x, T s, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) x[i] *= s;
}`)
	r, err := c.Compile(context.Background(), src, nvrtc.Options{
		Name:            "scale.cu",
		Arch:            "sm_90",
		Flags:           []string{"-std=c++17"},
		NameExpressions: []string{"scale<float>"},
	})
	var ce *nvrtc.CompileError
	if errors.As(err, &ce) {
		log.Fatalf("%s failed:\n%s", ce.Program, ce.Log)
	}
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("NVRTC %s: %d-byte %v, kernel %s\n", c.VersionString(), len(r.Code), r.Kind, r.Lowered["scale<float>"])
}
