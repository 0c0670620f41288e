package filestream

// Committing a Cache entry: the record is written to a new file in
// tmp/ and renamed over its name in its shard directory, every step
// relative to a held directory. A Unix rename replaces its target
// atomically (commit_unix.go); on Windows a rename over a file another
// process holds open fails for a moment, so it is retried within bounds
// (commit_windows.go, retryRename).

import (
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"sync/atomic"
	"time"
)

// The retry bounds of retryRename: about a quarter of a second in all.
const (
	commitRetries    = 8
	commitFirstPause = time.Millisecond
)

// retryRename calls rename until it succeeds, fails with an error that
// retryable rejects, or has been retried commitRetries times, sleeping a
// doubling pause from commitFirstPause between tries. Windows commits use
// it (commit_windows.go); it is portable so its policy is tested
// everywhere.
func retryRename(rename func() error, retryable func(error) bool, sleep func(time.Duration)) error {
	pause := commitFirstPause
	for i := 0; ; i++ {
		err := rename()
		if err == nil || i == commitRetries || !retryable(err) {
			return err
		}
		sleep(pause)
		pause *= 2
	}
}

var tmpSeq atomic.Uint64

// tmpName is unique across processes and hosts sharing the directory.
func tmpName() string {
	return ".entry-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatUint(tmpSeq.Add(1), 10) + "-" + strconv.FormatUint(rand.Uint64(), 36)
}

// commitLocked writes rec to a new file in tmp/ and renames it over name in
// the shard directory sd. With Sync the file is fsynced before the rename
// and the shard directory after it. Without Sync nothing is fsynced: that is
// the whole cost of cuda.core's put, and records are checksummed, so a torn
// file after a crash is a counted miss. (renameio does the same dance on
// path names; here every step is relative to a held directory, so no path
// component can be swapped for a link in between.)
func (c *Cache) commitLocked(sd *cacheDir, name string, rec []byte) error {
	tn := tmpName()
	f, err := c.tmpD.create(tn)
	if err != nil {
		return err
	}
	err = c.writeRecord(f, rec)
	if err == nil && c.opts.Sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = renameRetrying(func() error { return c.tmpD.rename(tn, sd, name) })
	}
	if err != nil {
		_ = c.tmpD.remove(tn) // err is what counts; scan sweeps a leftover past TempLease
		return err
	}
	if c.opts.Sync {
		return sd.sync()
	}
	return nil
}

// writeRecord writes rec to f, calling the midWrite hook half way.
func (c *Cache) writeRecord(f io.Writer, rec []byte) error {
	half := len(rec) / 2
	if _, err := f.Write(rec[:half]); err != nil {
		return err
	}
	if c.hooks.midWrite != nil {
		c.hooks.midWrite()
	}
	_, err := f.Write(rec[half:])
	return err
}
