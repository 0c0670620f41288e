package cuda_test

import (
	"errors"
	"fmt"

	"github.com/accelkit/accelkit/driver"
	_ "github.com/accelkit/accelkit/driver/cuda"
)

// A program asks for CUDA and falls back when the machine has none: a
// missing driver library is ErrNoDevice, a build without cgo
// ErrNotSupported; neither crashes.
func Example() {
	drv, err := driver.Open("cuda", "lib=/nonexistent/libcuda.so.1")
	if err != nil {
		unavailable := errors.Is(err, driver.ErrNoDevice) || errors.Is(err, driver.ErrNotSupported)
		fmt.Println("cuda unavailable:", unavailable)
		return
	}
	defer drv.Close()
	fmt.Println(drv.Version())
	// Output: cuda unavailable: true
}
