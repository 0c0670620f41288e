//go:build !windows

package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/google/renameio/v2"
)

// renamePending is renameio's pending file, with the directory to sync.
type renamePending struct {
	*renameio.PendingFile
	// sub, in a root, is the destination's directory opened as a root of
	// its own (renameio puts the temporary file at the top of the root it
	// is given); closed by syncDir or remove.
	sub *os.Root
	dir string
}

func newPending(root *os.Root, name string, perm os.FileMode, existing *fs.FileMode) (pending, error) {
	opts := []renameio.Option{renameio.WithPermissions(perm)}
	var sub *os.Root
	d := dir(root, name)
	if root != nil {
		var err error
		if sub, err = root.OpenRoot(d); err != nil {
			return nil, err
		}
		name = filepath.Base(filepath.FromSlash(name))
		opts = append(opts, renameio.WithRoot(sub))
	} else {
		opts = append(opts, renameio.WithTempDir(d))
	}
	if existing != nil {
		// The existing bits exactly, which the umask may not allow.
		opts = append(opts, renameio.WithStaticPermissions(*existing))
	}
	t, err := renameio.NewPendingFile(name, opts...)
	if err != nil {
		if sub != nil {
			sub.Close()
		}
		return nil, err
	}
	return renamePending{t, sub, d}, nil
}

func (p renamePending) replace() error { return p.CloseAtomicallyReplace() }

func (p renamePending) remove() error {
	err := p.Cleanup()
	if p.sub != nil {
		err = errors.Join(err, p.sub.Close())
	}
	return err
}

func (p renamePending) syncDir() error {
	var d *os.File
	var err error
	if p.sub != nil {
		defer p.sub.Close()
		d, err = p.sub.Open(".")
	} else {
		d, err = os.Open(p.dir)
	}
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}
