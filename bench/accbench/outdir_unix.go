//go:build !windows

package accbench

import (
	"errors"
	"os"

	"github.com/google/renameio/v2"
)

type renamePending struct{ *renameio.PendingFile }

func (o *outDir) newPending(name string, perm os.FileMode) (pendingOut, error) {
	t, err := renameio.NewPendingFile(name, renameio.WithRoot(o.root), renameio.WithPermissions(perm))
	if err != nil {
		return nil, err
	}
	return renamePending{t}, nil
}

func (p renamePending) commit() error { return p.CloseAtomicallyReplace() }
func (p renamePending) cleanup()      { _ = p.Cleanup() } // a no-op once committed; the caller is failing otherwise

// syncDir makes the renames into dir durable (renameio does not).
func (o *outDir) syncDir(dir string) error {
	d, err := o.root.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}
