//go:build windows

package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// writeOutput replaces path with data: renameio does not support Windows,
// so this writes a temporary file in path's directory, syncs and closes it,
// and renames it over path (MoveFileEx with MOVEFILE_REPLACE_EXISTING). On
// any failure before the rename, path is untouched and the temporary file
// is removed. wrap, when non-nil, wraps the temporary file's writer.
func writeOutput(path string, data []byte, wrap func(io.Writer) io.Writer) (err error) {
	perm, _, err := outputPerm(path)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"*")
	if err != nil {
		return err
	}
	renamed := false
	defer func() {
		if renamed {
			return
		}
		f.Close()
		if rerr := os.Remove(f.Name()); rerr != nil && err != nil {
			err = fmt.Errorf("%w (and removing the temporary file %s failed: %w)", err, f.Name(), rerr)
		}
	}()
	var w io.Writer = f
	if wrap != nil {
		w = wrap(w)
	}
	if _, err := w.Write(data); err != nil {
		return fmt.Errorf("writing %s (left unchanged): %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("writing %s (left unchanged): %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s (left unchanged): %w", path, err)
	}
	if err := os.Chmod(f.Name(), perm); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("replacing %s (left unchanged): %w", path, err)
	}
	renamed = true
	return nil
}
