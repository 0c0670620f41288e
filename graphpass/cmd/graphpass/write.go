package main

import (
	"fmt"
	"io"

	"github.com/accelkit/accelkit/atomicfile"
)

// writeOutput replaces path with data by the atomicfile module's policy:
// a temporary file beside path, fsynced, renamed over it, the directory
// fsynced; an existing path keeps its permission bits, a new one gets
// newFilePerm less the umask; anything but a regular file at path is
// refused (run refuses it with checkOutput's message before the work). On
// any failure before the rename, path is untouched and the temporary file
// removed. wrap, when non-nil, wraps the temporary file's writer (a test
// seam).
func writeOutput(path string, data []byte, wrap func(io.Writer) io.Writer) (err error) {
	f, err := atomicfile.Create(path, newFilePerm)
	if err != nil {
		return err
	}
	defer func() {
		// A no-op after Commit; otherwise removes the temporary file.
		if cerr := f.Cleanup(); cerr != nil && err != nil {
			err = fmt.Errorf("%w (and %w)", err, cerr)
		}
	}()
	var w io.Writer = f
	if wrap != nil {
		w = wrap(w)
	}
	if _, err := w.Write(data); err != nil {
		return fmt.Errorf("writing %s (left unchanged): %w", path, err)
	}
	return f.Commit()
}
