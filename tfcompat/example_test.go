package tfcompat_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/accelkit/accelkit/tfcompat"
)

func ExampleCheck() {
	for _, s := range []string{"2.16.1+nv24.01", "2.17.0rc1"} {
		v, _ := tfcompat.ParseVersion(s)
		fmt.Println(s, tfcompat.Check(v) == nil)
	}
	// Output:
	// 2.16.1+nv24.01 true
	// 2.17.0rc1 false
}

func ExampleCompare() {
	a := tfcompat.MustParseVersion("2.15.0.dev20240101")
	b := tfcompat.MustParseVersion("2.15.0rc0")
	fmt.Println(tfcompat.Compare(a, b))
	// Output: -1
}

func ExampleFeatures() {
	f, _ := tfcompat.Features(tfcompat.MustParseVersion("2.10.0"))
	fmt.Printf("SE %d.%d.%d memset=%v\n", f.Major, f.Minor, f.Patch, f.Memset)
	// Output: SE 0.0.1 memset=true
}

func ExampleCheckPJRT() {
	fw := tfcompat.APIVersion{Major: 0, Minor: 54}
	fmt.Println(tfcompat.CheckPJRT(fw, tfcompat.APIVersion{Major: 0, Minor: 50}, true))
	fmt.Println(tfcompat.CheckPJRT(fw, tfcompat.APIVersion{Major: 0, Minor: 50}, false))
	// Output:
	// <nil>
	// tfcompat: incompatible pjrt c api version: plugin 0.50, framework 0.54: without compatibility mode major and minor must be equal
}

func ExampleParsePluginPathsFor() {
	ps, err := tfcompat.ParsePluginPathsFor("cuda:/opt/pjrt/cuda.so,mydev:/etc/mydev.json", "linux")
	fmt.Println(err)
	for _, p := range ps {
		fmt.Println(p.Name, p.Path, p.Config)
	}
	_, err = tfcompat.ParsePluginPathsFor("cuda:/a.so,cuda:/b.so", "linux")
	fmt.Println(err)
	// Output:
	// <nil>
	// cuda /opt/pjrt/cuda.so false
	// mydev /etc/mydev.json true
	// tfcompat: invalid PJRT_NAMES_AND_LIBRARY_PATHS: entry 2 "cuda:/b.so": duplicate name "cuda" (first at entry 1); expected name:path entries separated by commas, e.g. cuda:/opt/pjrt/libcuda_plugin.so
}

func ExampleDetectTF() {
	dir, _ := os.MkdirTemp("", "site-packages")
	defer os.RemoveAll(dir)
	for name, md := range map[string]string{
		"tensorflow_cpu-2.13.0.dist-info":       "Name: tensorflow-cpu\nVersion: 2.13.0\n",
		"tensorflow_estimator-2.13.0.dist-info": "Name: tensorflow-estimator\nVersion: 2.13.0\n",
	} {
		_ = os.Mkdir(filepath.Join(dir, name), 0o755)
		_ = os.WriteFile(filepath.Join(dir, name, "METADATA"), []byte(md), 0o644)
	}
	inst, err := tfcompat.DetectTF(dir)
	fmt.Println(inst.Name, inst.Version, err, tfcompat.Check(inst.Version))
	// Output: tensorflow-cpu 2.13.0 <nil> <nil>
}
