//go:build linux && cgo

package cuda

import (
	"testing"
)

// TestRealLaunch loads the reference kernels' PTX through the real
// driver's JIT, where one is installed with a device (skipped elsewhere),
// and checks a vector add and a reduction against the host.
func TestRealLaunch(t *testing.T) {
	drv := openReal(t).(*cudaDriver)
	defer drv.Close()
	d := drv.devs[0]
	p, err := d.Properties()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s, %s, loader %s", p.Name, drv.Version(), p.Attributes["loader"])
	checkKernels(t, drv)
}
