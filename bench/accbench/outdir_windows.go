//go:build windows

package accbench

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
)

// Windows has no renameio: a temporary file beside the destination,
// fsynced and renamed over it (MoveFileEx with MOVEFILE_REPLACE_EXISTING).
// Directories cannot be synced there.
type rootPending struct {
	*os.File
	root      *os.Root
	tmp, name string
	done      bool
}

func (o *outDir) newPending(name string, perm os.FileMode) (pendingOut, error) {
	for range 100 {
		tmp := path.Join(path.Dir(name), fmt.Sprintf(".%s%d", path.Base(name), rand.Int64()))
		f, err := o.root.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return &rootPending{File: f, root: o.root, tmp: tmp, name: name}, nil
	}
	return nil, fmt.Errorf("no free temporary name beside %s", name)
}

func (p *rootPending) commit() error {
	if err := p.Sync(); err != nil {
		return err
	}
	if err := p.Close(); err != nil {
		return err
	}
	if err := p.root.Rename(p.tmp, p.name); err != nil {
		return err
	}
	p.done = true
	return nil
}

func (p *rootPending) cleanup() {
	if !p.done {
		p.Close()
		_ = p.root.Remove(p.tmp) // the caller is failing already
	}
}

func (o *outDir) syncDir(string) error { return nil }
