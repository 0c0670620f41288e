//go:build !windows

package progcache

import (
	"os"
	"path/filepath"

	"github.com/google/renameio/v2"
)

// commit writes rec to a temp file in tmp/ and renames it over p. With
// Sync, renameio's CloseAtomicallyReplace fsyncs the file before the rename
// and the shard directory is fsynced after it. Without Sync the temp file
// is closed and renamed with no fsync: renameio's CloseAtomicallyReplace
// always fsyncs, which is the whole cost of cuda.core's put, and records
// are checksummed, so a torn file after a crash is a counted miss.
func (c *FileStream) commit(p string, rec []byte) error {
	pf, err := renameio.NewPendingFile(p, renameio.WithTempDir(c.tmp), renameio.WithStaticPermissions(filePerm))
	if err != nil {
		return err
	}
	if err := c.writeRecord(pf, rec); err != nil {
		pf.Cleanup()
		return err
	}
	if c.opts.Sync {
		if err := pf.CloseAtomicallyReplace(); err != nil {
			pf.Cleanup() // no-op once the rename happened
			return err
		}
		return syncDir(filepath.Dir(p))
	}
	// Close and rename by hand: Cleanup must not run after this point, as
	// the temp name is gone once renamed.
	tmpName := pf.Name()
	err = pf.File.Close()
	if err == nil {
		err = os.Rename(tmpName, p)
	}
	if err != nil {
		os.Remove(tmpName)
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
