package nvrtc_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/nvrtc"
)

// TestRealNVRTC runs only where a real libnvrtc loads (the default search,
// not ACCELKIT_LIBNVRTC, which tests point at the fake).
func TestRealNVRTC(t *testing.T) {
	t.Setenv(nvrtc.EnvLibrary, "")
	c, err := nvrtc.Open("")
	if err != nil {
		t.Skipf("no NVRTC installed: %v", err)
	}
	archs := c.SupportedArchs()
	if len(archs) == 0 {
		t.Fatalf("NVRTC %s at %s lists no architectures", c.VersionString(), c.Path())
	}
	a := archs[len(archs)-1]
	t.Logf("NVRTC %s at %s, architectures %v", c.VersionString(), c.Path(), archs)
	src := kernels + `
template <typename T>
__global__ void fill(T* x, T v, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) x[i] = v;
}
`
	ptx, err := c.Compile(context.Background(), []byte(src), nvrtc.Options{
		Arch:            "compute_" + strconv.Itoa(a),
		NameExpressions: []string{"accelkit_vector_add", "fill<float>"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if ptx.Kind != driver.ImagePTX || driver.DetectImage(ptx.Code) != driver.ImagePTX || !strings.Contains(string(ptx.Code), ".entry accelkit_vector_add(") {
		t.Errorf("compute_%d gave %v (detected %v) without accelkit_vector_add", a, ptx.Kind, driver.DetectImage(ptx.Code))
	}
	if ptx.Lowered["accelkit_vector_add"] != "accelkit_vector_add" || ptx.Lowered["fill<float>"] != "_Z4fillIfEvPT_S0_i" {
		t.Errorf("Lowered = %v", ptx.Lowered)
	}
	cubin, err := c.Compile(context.Background(), []byte(src), nvrtc.Options{Arch: "sm_" + strconv.Itoa(a)})
	if err != nil {
		t.Fatal(err)
	}
	if cubin.Kind != driver.ImageCubin || driver.DetectImage(cubin.Code) != driver.ImageCubin {
		t.Errorf("sm_%d gave %v, detected %v; want a cubin", a, cubin.Kind, driver.DetectImage(cubin.Code))
	}
	_, err = c.Compile(context.Background(), []byte("#error real nvrtc fails here\n"), nvrtc.Options{Arch: "compute_" + strconv.Itoa(a)})
	var ce *nvrtc.CompileError
	if !errors.As(err, &ce) || !strings.Contains(ce.Log, "real nvrtc fails here") {
		t.Errorf("err = %v; want a CompileError with the #error text in its log", err)
	}
}
