// Command genmatrix writes tfcompat/docs/compat-matrix.md from the embedded
// matrix; run it through go generate in the tfcompat directory.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/accelkit/accelkit/tfcompat"
)

func main() {
	out := flag.String("out", "docs/compat-matrix.md", "file to write")
	flag.Parse()
	m, err := tfcompat.Matrix()
	if err != nil {
		fmt.Fprintln(os.Stderr, "genmatrix:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(*out, tfcompat.RenderMatrixMarkdown(m), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "genmatrix:", err)
		os.Exit(1)
	}
}
