//go:build !windows

package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/google/renameio/v2"
)

// writeOutput replaces path with data atomically: renameio writes a
// temporary file in path's directory (never os.TempDir, which may be on
// another file system), fsyncs it and renames it over path; the directory
// is fsynced after. On any failure before the rename, path is untouched and
// the temporary file is removed. An existing path keeps its permission
// bits; outputPerm refuses anything but a regular file or no file. wrap,
// when non-nil, wraps the temporary file's writer (a test seam).
func writeOutput(path string, data []byte, wrap func(io.Writer) io.Writer) (err error) {
	perm, exists, err := outputPerm(path)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	// WithPermissions creates the file with perm less the umask.
	pf, err := renameio.NewPendingFile(path, renameio.WithTempDir(dir), renameio.WithPermissions(perm))
	if err != nil {
		return err
	}
	defer func() {
		// A no-op after the rename; otherwise closes and removes the
		// temporary file.
		if cerr := pf.Cleanup(); cerr != nil && err != nil {
			err = fmt.Errorf("%w (and removing the temporary file %s failed: %w)", err, pf.Name(), cerr)
		}
	}()
	if exists {
		// The existing file's bits exactly, which the umask may not allow.
		if err := pf.Chmod(perm); err != nil {
			return err
		}
	}
	var w io.Writer = pf
	if wrap != nil {
		w = wrap(w)
	}
	if _, err := w.Write(data); err != nil {
		return fmt.Errorf("writing %s (left unchanged): %w", path, err)
	}
	if err := pf.CloseAtomicallyReplace(); err != nil {
		return fmt.Errorf("replacing %s (left unchanged): %w", path, err)
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("%s was replaced, but syncing its directory failed, so the rename may not survive a crash: %w", path, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
