package progcache_test

import (
	"context"
	"fmt"
	"os"

	"github.com/accelkit/accelkit/progcache"
	"github.com/accelkit/accelkit/progcache/filestream"
)

func ExampleMakeKey() {
	in := progcache.KeyInput{
		Sources:   []progcache.Source{{Name: "saxpy.cu", Code: []byte(`extern "C" __global__ void saxpy() {}`)}},
		CodeType:  "c++",
		Target:    "cubin",
		Options:   progcache.Options{Arch: "sm_90", Extra: []string{"-G", "-DN=4"}},
		Toolchain: []progcache.Component{{Name: "nvrtc", Version: "13.0"}},
	}
	k1, err := progcache.MakeKey(in)
	if err != nil {
		panic(err)
	}
	// The same options spelled differently give the same key.
	in.Options = progcache.Options{Extra: []string{"--define-macro=N=4", "--device-debug", "--gpu-architecture=sm_90"}}
	k2, _ := progcache.MakeKey(in)
	fmt.Println(k1 == k2, len(k1.String()))

	// Include paths pull in headers the key cannot see.
	in.Options.IncludePaths = []string{"/opt/include"}
	_, err = progcache.MakeKey(in)
	fmt.Println(err != nil)
	// Output:
	// true 64
	// true
}

func ExampleNewMemory() {
	ctx := context.Background()
	c, err := progcache.NewMemory(progcache.MemoryOptions{MaxEntries: 100, MaxBytes: 64 << 20})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	var k progcache.Key // normally from MakeKey
	c.Put(ctx, k, progcache.Object{Kind: "cubin", Code: []byte{0x7f, 'E', 'L', 'F'}})
	obj, ok, _ := c.Get(ctx, k)
	fmt.Println(ok, obj.Kind, len(obj.Code))
	// Output: true cubin 4
}

func ExampleGetOrCompile() {
	ctx := context.Background()
	c, _ := progcache.NewMemory(progcache.MemoryOptions{})
	k, _ := progcache.MakeKey(progcache.KeyInput{
		Sources:  []progcache.Source{{Name: "k.cu", Code: []byte("__global__ void k() {}")}},
		CodeType: "c++", Target: "cubin",
	})
	compiles := 0
	compile := func(ctx context.Context) (progcache.Object, error) {
		compiles++ // a real compile runs NVRTC or nvcc here
		return progcache.Object{Kind: "cubin", Code: []byte("object code")}, nil
	}
	for range 3 {
		if _, err := progcache.GetOrCompile(ctx, c, k, compile); err != nil {
			panic(err)
		}
	}
	fmt.Println("compiles:", compiles)
	// Output: compiles: 1
}

func ExampleViewFrom() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "progcache-view-")
	defer os.RemoveAll(dir)
	c, err := filestream.Open(dir, filestream.Options{})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	var k progcache.Key
	copy(k[:], "example key")
	c.Put(ctx, k, progcache.Object{Kind: "cubin", Code: []byte("\x7fELF..."), Symbols: map[string]string{"saxpy": "_Z5saxpyv"}})

	// The callback sees the record in a buffer the cache reuses: read or
	// copy what you need before it returns (a driver's module load copies
	// the code).
	ok, err := progcache.ViewFrom(ctx, c, k, func(v progcache.View) error {
		sym, _ := v.Symbol("saxpy")
		fmt.Println(v.Kind(), len(v.Code()), sym)
		return nil
	})
	fmt.Println(ok, err)
	// Output:
	// cubin 7 _Z5saxpyv
	// true <nil>
}
