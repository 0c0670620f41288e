//go:build windows

package progcache

import (
	"os"
	"time"
)

// Windows has no renameio: commit writes a temp file in tmp/ and renames it
// over p with os.Rename (MoveFileEx with MOVEFILE_REPLACE_EXISTING), which
// fails with a sharing violation while a reader holds the destination open.
// It retries a bounded number of times with a doubling pause.
const (
	commitRetries    = 8
	commitFirstPause = time.Millisecond
)

func (c *FileStream) commit(p string, rec []byte) error {
	f, err := os.CreateTemp(c.tmp, ".entry-*")
	if err != nil {
		return err
	}
	tmpName := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmpName)
		}
	}()
	if err := c.writeRecord(f, rec); err != nil {
		return err
	}
	if c.opts.Sync {
		if err := f.Sync(); err != nil {
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	pause := commitFirstPause
	for i := 0; ; i++ {
		err = os.Rename(tmpName, p)
		if err == nil || i == commitRetries {
			break
		}
		time.Sleep(pause)
		pause *= 2
	}
	if err != nil {
		return err
	}
	ok = true
	return nil
}
