// Command genmatrix writes tfcompat/docs/compat-matrix.md from the embedded
// matrix; run it through go generate in the tfcompat directory.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

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
	if err := writeFileAtomic(*out, tfcompat.RenderMatrixMarkdown(m), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "genmatrix:", err)
		os.Exit(1)
	}
}

// writeFileAtomic replaces path with data through a synced temporary file
// in the same directory, so a failure leaves the old file whole.
func writeFileAtomic(path string, data []byte, perm os.FileMode) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Chmod(perm); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
