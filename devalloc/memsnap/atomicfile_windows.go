//go:build windows

package memsnap

import (
	"os"
	"path/filepath"
)

// Windows has no renameio: a temporary file in the destination's
// directory, fsynced, renamed over it with os.Rename (MoveFileEx with
// MOVEFILE_REPLACE_EXISTING). Directories cannot be synced there.
type tempPending struct {
	*os.File
	path string
	done bool
}

func newPendingFile(path string, perm os.FileMode) (pendingFile, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return nil, err
	}
	if fi, err := os.Lstat(path); err == nil && fi.Mode().IsRegular() {
		perm = fi.Mode().Perm()
	}
	_ = f.Chmod(perm) // best effort: only the read-only bit means anything on Windows
	return &tempPending{File: f, path: path}, nil
}

func (p *tempPending) commit() error {
	if err := p.Sync(); err != nil {
		return err
	}
	if err := p.Close(); err != nil {
		return err
	}
	if err := os.Rename(p.Name(), p.path); err != nil {
		return err
	}
	p.done = true
	return nil
}

func (p *tempPending) cleanup() {
	if !p.done {
		p.Close()
		_ = os.Remove(p.Name()) // the caller is failing already
	}
}
