package inspect_test

import (
	"context"
	"fmt"
	"os"

	"github.com/accelkit/accelkit/tfcompat"
	"github.com/accelkit/accelkit/tfcompat/inspect"
)

// A program that inspects plugins calls RunChild first in main: the
// inspector runs the program again as the child that loads each plugin.
func Example() {
	inspect.RunChild()

	fw := tfcompat.APIVersion{Major: 0, Minor: 54} // the framework's PJRT C API
	r, err := inspect.Inspect(context.Background(), "/nonexistent/pjrt_plugin.so", inspect.Options{Framework: &fw})
	if err != nil {
		fmt.Println("inspector error:", err)
		return
	}
	fmt.Println(r.Verdict, r.Findings[0].Check)
	// Output: fail file
}

func ExampleParseConfig() {
	c, err := inspect.ParseConfig([]byte(`{"library_path": "/opt/pjrt/plugin.so", "create_options": {"visible_devices": [0, 1]}}`))
	fmt.Println(c.LibraryPath, c.CreateOptions["visible_devices"], err)
	_, err = inspect.ParseConfig([]byte(`{"path": "/opt/pjrt/plugin.so"}`))
	fmt.Println(err)
	// Output:
	// /opt/pjrt/plugin.so [0 1] <nil>
	// inspect: invalid PJRT plugin config: no "library_path" field (JAX requires it: the plugin's shared library)
}

func ExampleWriteText() {
	r := inspect.Report{Path: "/opt/pjrt/plugin.so", Kind: inspect.KindPJRT, Verdict: inspect.Fail,
		Findings: []inspect.Finding{{Severity: inspect.Fail, Check: "pjrt.null", Message: "PJRT_Client_Create is NULL: no client, no devices"}}}
	inspect.WriteText(os.Stdout, []inspect.Report{r})
	// Output:
	// FAIL: /opt/pjrt/plugin.so [pjrt]
	//   fail pjrt.null: PJRT_Client_Create is NULL: no client, no devices
}
