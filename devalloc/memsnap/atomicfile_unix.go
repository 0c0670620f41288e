//go:build !windows

package memsnap

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/renameio/v2"
)

type renamePending struct {
	*renameio.PendingFile
	path string
}

func newPendingFile(path string, perm os.FileMode) (pendingFile, error) {
	t, err := renameio.NewPendingFile(path, renameio.WithTempDir(filepath.Dir(path)),
		renameio.WithPermissions(perm), renameio.WithExistingPermissions())
	if err != nil {
		return nil, err
	}
	return renamePending{t, path}, nil
}

// cleanup is a no-op once committed; removing the temporary file can fail
// only in ways the caller, already failing, cannot act on.
func (p renamePending) cleanup() { _ = p.Cleanup() }

func (p renamePending) commit() error {
	if err := p.CloseAtomicallyReplace(); err != nil {
		return err
	}
	// The rename is durable once the directory is synced (renameio does
	// not do it).
	d, err := os.Open(filepath.Dir(p.path))
	if err == nil {
		err = errors.Join(d.Sync(), d.Close())
	}
	if err != nil {
		return fmt.Errorf("%s is written, but syncing its directory failed, so a crash may lose it: %w", p.path, err)
	}
	return nil
}
